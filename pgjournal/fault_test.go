package pgjournal_test

const childEnv = "PGJOURNAL_TEST_CHILD"

func runChild() int { return 0 }
