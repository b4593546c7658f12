// Package packaging holds no Go code of the agent: it is the home of the install kit
// (install.sh), the .deb build (build-deb.sh), the systemd units, the ansible role and
// check.sh, the one script CI runs over all of them.
//
// Its tests keep the kit honest: the configs that install.sh and the ansible template
// write (samples under testdata/, re-rendered and diffed by check.sh) must parse with
// the agent's own strict config parser, and the one version string must agree across
// deployd.Version, DEFAULT_VERSION in install.sh, the role's default and CHANGELOG.md.
package packaging
