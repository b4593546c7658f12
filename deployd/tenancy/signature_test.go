package tenancy_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/deployd/tenancy"
)

// TestSignatureAgainstFake: its subtests share one fake, in order.
func TestSignatureAgainstFake(t *testing.T) {
	f := newFixture(t, nil)
	b := f.publish(t, 1)
	t.Run("unsigned_is_an_answer", func(t *testing.T) {
		got, err := f.c.Signature(t.Context(), b.SHA)
		require.NoError(t, err)
		assert.Equal(t, tenancy.Signature{Unsigned: true}, got)
	})
	t.Run("empty_file_is_signed_but_empty", func(t *testing.T) {
		require.NoError(t, f.fake.PublishSignature(env, b.SHA, nil))
		got, err := f.c.Signature(t.Context(), b.SHA)
		require.NoError(t, err)
		assert.False(t, got.Unsigned)
		assert.Empty(t, got.Data)
	})
	t.Run("ok", func(t *testing.T) {
		sig := []byte("monky-deployd signature v1\nalg ed25519\n")
		require.NoError(t, f.fake.PublishSignature(env, b.SHA, sig))
		got, err := f.c.Signature(t.Context(), b.SHA)
		require.NoError(t, err)
		assert.Equal(t, tenancy.Signature{Data: sig}, got, "byte for byte")
	})
	t.Run("other_env_is_env_mismatch", func(t *testing.T) {
		other, err := faketenancy.BuildBundle(faketenancy.BundleSpec{EnvID: "env-dev-02"})
		require.NoError(t, err)
		sha, _, err := f.fake.PublishBundle("env-dev-02", other.Data)
		require.NoError(t, err)
		require.NoError(t, f.fake.PublishSignature("env-dev-02", sha, []byte("x")))
		_, err = f.c.Signature(t.Context(), sha)
		require.ErrorIs(t, err, tenancy.ErrEnvMismatch)
	})
	t.Run("bad_sha_not_sent", func(t *testing.T) {
		before := len(f.fake.Requests())
		_, err := f.c.Signature(t.Context(), "../bundles")
		require.ErrorIs(t, err, tenancy.ErrInvalidArgument)
		assert.Len(t, f.fake.Requests(), before)
	})
	t.Run("forced_503_is_unavailable", func(t *testing.T) {
		f.fake.SetFaults(faketenancy.Faults{Status: map[string]int{"signature": 503}})
		_, err := f.c.Signature(t.Context(), b.SHA)
		require.ErrorIs(t, err, tenancy.ErrUnavailable)
		assert.True(t, deployd.IsTemporary(err))
		var ae *tenancy.APIError
		require.ErrorAs(t, err, &ae)
		assert.Equal(t, "signature", ae.Op)
	})
}

func TestSignatureSize(t *testing.T) {
	sha := strings.Repeat("a", 64)
	serve := func(t *testing.T, n int, announce bool) *tenancy.Client {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			assert.Equal(t, "/v1/agent/bundles/"+sha+"/signature", r.URL.Path)
			assert.Equal(t, "text/plain", r.Header.Get("Accept"))
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			if announce {
				w.Header().Set("Content-Length", strconv.Itoa(n))
			}
			w.WriteHeader(http.StatusOK)
			for i := 0; i < n; i += 1024 { // chunked when not announced
				_, _ = w.Write([]byte(strings.Repeat("s", min(1024, n-i))))
				w.(http.Flusher).Flush()
			}
		}))
		t.Cleanup(srv.Close)
		return client(t, srv.URL, "tok", nil, nil)
	}
	for _, announce := range []bool{true, false} {
		name := map[bool]string{true: "announced", false: "streamed"}[announce]
		t.Run("exactly_the_cap_"+name, func(t *testing.T) {
			got, err := serve(t, tenancy.MaxSignatureSize, announce).Signature(t.Context(), sha)
			require.NoError(t, err)
			assert.Len(t, got.Data, tenancy.MaxSignatureSize)
		})
		t.Run("too_large_"+name, func(t *testing.T) {
			_, err := serve(t, tenancy.MaxSignatureSize+1, announce).Signature(t.Context(), sha)
			require.ErrorIs(t, err, tenancy.ErrSignatureTooLarge)
			assert.Equal(t, codes.SignatureInvalid, codeOf(err))
			assert.False(t, deployd.IsTemporary(err))
			assert.Contains(t, err.Error(), "longer than 4096 bytes")
		})
	}
	t.Run("404_without_body_is_unsigned", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		t.Cleanup(srv.Close)
		got, err := client(t, srv.URL, "tok", nil, nil).Signature(t.Context(), sha)
		require.NoError(t, err)
		assert.True(t, got.Unsigned, "a tenancy that does not know the call: unsigned, so a box that requires signatures fails closed")
	})
	t.Run("401_is_unauthenticated", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusUnauthorized)
		}))
		t.Cleanup(srv.Close)
		_, err := client(t, srv.URL, "tok", nil, nil).Signature(t.Context(), sha)
		require.ErrorIs(t, err, tenancy.ErrUnauthenticated)
	})
}
