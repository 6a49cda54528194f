package main

import (
	"context"
	"os"

	"github.com/redkit-go/redkit/tools/release"
)

func apiCheck(root string, keep bool) error {
	dir, cleanup, err := tempDir(keep)
	if err != nil {
		return err
	}
	defer cleanup()
	st, err := release.NewStage(root, dir, release.StageOptions{FillSums: true})
	if err != nil {
		return err
	}
	return st.APICheck(context.Background(), root, dir, os.Stdout)
}
