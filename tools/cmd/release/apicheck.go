package main

import "fmt"

func apiCheck(root string, keep bool) error { return fmt.Errorf("not yet") }
