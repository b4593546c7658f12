// Package transport builds the *http.Client through which the agent calls
// monky-tenancy (docs/TRANSPORTS.md): over the embedded OpenZiti SDK ("sdk"), through the local
// tunneler's HTTP proxy ("proxy") or directly over the host's network ("system").
// docs/TRANSPORTS.md says when to choose which.
//
// This package does not link the OpenZiti SDK (a test keeps it so): New builds "proxy"
// and "system" and refuses "sdk" with ErrNeedsSDK. The sdk transport's HTTP side is
// here (NewWithDialer, NewWithOwnedDialer over a Dialer); its OpenZiti side, the
// identity loading and the ZitiDialer, is internal/transport/zititransport, whose New
// builds all three. A program that needs no sdk transport imports only this package
// and so pays nothing of the SDK's package init.
//
// # The three transports
//
//   - sdk: an http.Transport built here (never the SDK's NewHttpClient or
//     NewZitiTransport, which share one connection between concurrent requests and
//     mishandle TLS: docs/TRANSPORTS.md) whose DialContext ignores the network address and dials
//     Config.Service through a Dialer (with zititransport.New, a *zititransport.ZitiDialer
//     over a ziti.Context).
//     The blocking Dial runs in a goroutine so that the dial's context, Config.Timeout
//     and Client.Close interrupt it; a connection that arrives late is closed. (A
//     request cancelled during its dial returns at once: since Go 1.23 net/http detaches
//     the dial from the request's context and lets it finish for a later request.) TLS runs
//     on top of the OpenZiti connection, end to end with tenancy. Each request in flight
//     has its own connection (HTTP/1.1, no HTTP/2).
//   - proxy: http.ProxyURL(Config.Proxy): CONNECT for an https URL (TLS end to end
//     through the tunnel), absolute-form requests for an http one.
//   - system: a direct dial, no proxy at all.
//
// No transport ever takes a proxy from the environment (HTTPS_PROXY and friends): a
// library does not read the environment, and a tick that silently goes elsewhere
// because of a variable in the unit's environment is not what an operator expects.
// cmd/ can add that later as an explicit option. The controller requests of the
// OpenZiti SDK, which would otherwise use http.ProxyFromEnvironment, are set to no
// proxy as well.
//
// # TLS
//
// RootCAs is the system pool plus the certificates of Config.CAFile; ServerName (SNI
// and verification name) is Config.ServerName or else the URL's host; TLS 1.2 at
// least. A ca_file must hold at least one PEM CERTIFICATE block and nothing but
// CERTIFICATE blocks (text between blocks is allowed); anything else is ErrCAFile,
// naming tenancy.ca_file and the path. The URL must be https; plain http is accepted
// only to a loopback host (a test fake, a local port of a tunneler).
//
// # Redirects
//
// Redirects are followed only within the scheme and host of Config.URL (at most 10). A
// redirect elsewhere is not followed: the 3xx response is returned as it is, and the
// tenancy client reports it as a protocol error. With sdk another host would still be
// dialed through the tenancy service; with the others the agent would leave the one
// endpoint it is configured for.
//
// # Timeouts
//
// Config.Timeout (zero: DefaultTimeout, 30s) bounds, each on its own, the dial (an
// OpenZiti dial including the controller login), the TLS handshake and the wait for
// the response headers. The client has no overall timeout: the tenancy client puts a
// deadline on each call, and a bundle download may take longer than a check-in. Idle
// connections are kept 90s (at most 4) and closed by Client.Close.
//
// # Errors
//
// Configuration errors come from New (and zititransport.New) and name the key (and the
// file): ErrInvalidConfig, ErrCAFile, ErrIdentity; ErrNeedsSDK is "sdk" given to New. An
// identity error never carries key material: zititransport loads and checks the file
// itself, the SDK's loader is not used on it (it ends the process with a logrus Fatal
// on a bad key, and its texts can quote the key address).
//
// A failed dial reaches the caller of Do as *url.Error → *net.OpError → *Error, so that
// it is a network error for the tenancy client, errors.Is classifies it and
// url.Error.Timeout reports a timeout:
//
//	what happened                               Op            Kind                 Timeout  Temporary
//	controller unreachable or refused identity  dial          ErrController        if so    true
//	service missing or no Dial policy           dial          ErrServiceNotFound   false    true
//	no edge router, router refused the circuit  dial          ErrUnreachable       if so    true
//	dial outlived Config.Timeout                dial          ErrUnreachable       true     true
//	request context cancelled / deadline        dial          ErrUnreachable       deadline true
//	proxy answered CONNECT with non-200         proxyconnect  ErrUnreachable       false    true
//	proxy or tenancy refused/unreachable (TCP)  dial/proxyconnect  (the *net.OpError of the system)
//	dial after Client.Close                     dial          ErrClosed            false    false
//
// ErrController and ErrServiceNotFound are also ErrUnreachable, and the family has the
// code UNAVAILABLE (Error.Code). All of them are temporary: the box cannot tell a
// policy that is not there yet from one that is missing for good, and the fix is on the
// controller, so the next tick retries (it costs no lease) while tenancy sees the
// missing check-ins.
//
// # OpenZiti SDK
//
// The SDK is linked only through internal/transport/zititransport, and touched only by
// the sdk transport: zititransport.New with "proxy" or "system" creates no
// ziti.Context. Linking it is not free of side effects, though: its package init
// reads ZITI_IDENTITIES and loads every identity listed there into a process-wide
// collection (and ends the process if one of them has a bad key). The agent links it;
// its unit should unset that variable. The SDK logs through the process-global logrus
// logger; neither package touches it (cmd/ routes it into slog), and at debug level the
// SDK logs its API session and service session tokens. ZitiDialer.Close closes the
// context (the refresh goroutine, the edge-router channels) and the controller's idle
// HTTP connections that the SDK's Close leaves behind.
package transport
