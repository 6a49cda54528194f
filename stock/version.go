package stock

// Version is this module's version, recorded as the instrumentation scope
// version of its spans and metrics. The release tooling (tools/release,
// make release-prepare) sets it to the version versions.yaml gives the
// module's set, and a test checks that the two agree.
const Version = "v0.1.0"
