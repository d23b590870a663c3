package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shellctl/shellctl/internal/agentstub"
)

func (a *app) manifestCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "manifest [--json]",
		Short: "List the skills and files and the size of the note",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			const what = "read manifest"
			c, err := a.client(what)
			if err != nil {
				return err
			}
			m, err := c.Manifest(ctxOf(cmd))
			if err != nil {
				return fail(what, err)
			}
			if asJSON {
				return a.printJSON(stableManifest(m))
			}
			_, err = fmt.Fprint(a.stdout, manifestText(m))
			return err
		},
	}
	c.Flags().BoolVar(&asJSON, jsonFlag, false, jsonFlagUse)
	return c
}

// stableManifest returns m with empty lists as [] rather than null, so the
// JSON has one shape whatever the backend sent.
func stableManifest(m *agentstub.Manifest) *agentstub.Manifest {
	out := *m
	for _, l := range []*agentstub.NameList{&out.Skills, &out.Files} {
		if l.Items == nil {
			l.Items = []agentstub.Named{}
		}
	}
	return &out
}

// manifestText is the manifest for people: one name per indented line.
func manifestText(m *agentstub.Manifest) string {
	var b strings.Builder
	for _, k := range []agentstub.Kind{agentstub.KindSkill, agentstub.KindFile} {
		names := m.Names(k)
		fmt.Fprintf(&b, "%ss (%d):\n", k, len(names))
		for _, n := range names {
			fmt.Fprintf(&b, "  %s\n", n)
		}
	}
	fmt.Fprintf(&b, "note: %d bytes\n", len(m.Note))
	return b.String()
}
