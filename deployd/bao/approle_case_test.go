package bao

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A login answer with AppRole fields spelled in another case is still an AppRole
// answer: the agent must not accept it because of the spelling.
func TestDecodeAuthAppRoleKeysAnyCase(t *testing.T) {
	for _, body := range []string{
		`{"data":{"Role_ID":"x"},"auth":{"client_token":"s.casefixture0123456789","lease_duration":3600,"renewable":true,"token_type":"service"}}`,
		`{"auth":{"client_token":"s.casefixture0123456789","metadata":{"SECRET_ID_ACCESSOR":"x"},"lease_duration":3600,"renewable":true,"token_type":"service"}}`,
	} {
		_, err := decodeAuth([]byte(body), discardRegistry{}, time.Unix(0, 0))
		require.NotNil(t, err, body)
		require.ErrorIs(t, err, ErrLeaseShape)
	}
}
