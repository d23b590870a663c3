//go:build !snapshotcli

package main

import "github.com/spf13/cobra"

func snapshotCmd(cf *clientFlags) *cobra.Command { return &cobra.Command{Use: "snapshot"} }
