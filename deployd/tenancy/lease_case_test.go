package tenancy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// encoding/json matches struct fields case-insensitively: a hostile lease can spell
// the grant "GRANT" and the AppRole fields "Secret_ID". The shape check and the
// secret registration must see them as the struct decode does.
func TestDecodeLeaseFieldCase(t *testing.T) {
	const grant = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJlbnYtZGV2LTAxIn0.c2lnbmF0dXJlLWNhc2UteHl6"
	const rest = `"auth_mount":"jwt-tenancy","role":"see-env","expires_at":"2026-11-30T10:10:00Z"`
	t.Run("approle field in another case among valid ones", func(t *testing.T) {
		for _, f := range []string{"Secret_ID", "ROLE_ID", "Wrap_Info", "WRAPPING_TOKEN", "ſecret_id", "wrapping_toKen"} {
			reg := &recordingRegistry{}
			_, err := decodeLease([]byte(`{"grant":"`+grant+`",`+rest+`,"`+f+`":"planted-approle-value-0123"}`),
				DefaultAuthMount, DefaultRole, fixedNow, reg)
			require.ErrorIs(t, err, ErrLeaseShape, f)
			assert.NotContains(t, err.Error(), "planted-approle-value-0123")
		}
	})
	t.Run("grant in another case is registered", func(t *testing.T) {
		reg := &recordingRegistry{}
		l, err := decodeLease([]byte(`{"GRANT":"`+grant+`",`+rest+`}`), DefaultAuthMount, DefaultRole, fixedNow, reg)
		if err == nil {
			assert.Equal(t, grant, l.Grant.Reveal())
		}
		assert.True(t, reg.has(grant), "the grant is registered whatever its key's case")
	})
	t.Run("two spellings of grant", func(t *testing.T) {
		reg := &recordingRegistry{}
		l, err := decodeLease([]byte(`{"grant":"x.y.z","Grant":"`+grant+`",`+rest+`}`), DefaultAuthMount, DefaultRole, fixedNow, reg)
		if err == nil {
			assert.True(t, reg.has(l.Grant.Reveal()))
		}
		assert.True(t, reg.has(grant))
	})
}
