package health

// Version is this module's version. The release tooling (tools/release,
// make release-prepare) sets it to the version versions.yaml gives the
// module's set, and a test checks that the two agree.
const Version = "v0.1.0"
