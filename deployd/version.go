package deployd

// Version is the agent's version. deployd.Version, DEFAULT_VERSION in
// packaging/install.sh and the newest release in CHANGELOG.md agree; a test checks it.
const Version = "0.1.0"
