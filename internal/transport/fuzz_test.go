package transport

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/monky/monky-deployd/internal/transport/transporttest"
)

func FuzzParseCABundle(f *testing.F) {
	transporttest.SeedFiles(f, "ca/*.pem")
	f.Add(transporttest.NewCA(f).PEM)
	f.Fuzz(func(t *testing.T, data []byte) {
		certs, err := parseCABundle(data)
		if err != nil {
			if len(certs) != 0 {
				t.Fatalf("certificates returned with an error")
			}
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrCAFile) || e.Key != "tenancy.ca_file" {
				t.Fatalf("error %v is not an ErrCAFile *Error naming tenancy.ca_file", err)
			}
			if len(err.Error()) > 200 {
				t.Fatalf("error text of %d bytes: the file's content leaks into it", len(err.Error()))
			}
			return
		}
		if len(certs) == 0 {
			t.Fatalf("no error and no certificate")
		}
	})
}

func FuzzURLs(f *testing.F) {
	for _, s := range []string{
		"https://tenancy.monky.internal", "http://127.0.0.1:8080", "http://user:s3cr3t-passw0rd@127.0.0.1:8080",
		"https://a:b@t", "socks5://u:p@h:1", "ftp://x", "/v1", "https://t/?x=1", "http://[::1]:1", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		password := ""
		if u, err := url.Parse(raw); err == nil && u.User != nil {
			if p, ok := u.User.Password(); ok && len(p) >= 8 {
				password = p
			}
		}
		for key, parse := range map[string]func(string) (*url.URL, error){
			"tenancy.url":   parseTenancyURL,
			"tenancy.proxy": parseProxyURL,
		} {
			u, err := parse(raw)
			if err != nil {
				if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), key) {
					t.Fatalf("%s: error %v does not name the key", key, err)
				}
				if password != "" && strings.Contains(err.Error(), password) {
					t.Fatalf("%s: error %v shows the password", key, err)
				}
				continue
			}
			if u.Hostname() == "" {
				t.Fatalf("%s: accepted %q without a host", key, raw)
			}
			if key == "tenancy.url" {
				loopbackHTTP := u.Scheme == "http" && isLoopbackHost(u.Hostname())
				if u.User != nil || (u.Scheme != "https" && !loopbackHTTP) {
					t.Fatalf("accepted tenancy URL %q", raw)
				}
			}
		}
	})
}
