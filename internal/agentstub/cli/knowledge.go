package cli

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shellctl/shellctl/internal/agentstub"
)

// The knowledge commands of agent-cli-backend.md: read-only Agentic
// Knowledge, protocol version 1, every result the server's JSON compacted.

const (
	knowledgeProtocol    = 1
	knowledgeInputLimit  = 24 << 10
	knowledgeOutputLimit = 64 << 10
	maxQueryImages       = 4
	maxImageRefLen       = 4096
)

var uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// kFlag is a flag of a knowledge subcommand and the body key it fills.
type kFlag struct {
	name, key, help string
	def             string // string flags
	intDef          int    // int flags (limit, depth)
	isInt           bool
}

var (
	kSpace   = kFlag{name: "space", key: "space", help: "Knowledge command space."}
	kQuery   = kFlag{name: "query", key: "query", help: "Knowledge command query."}
	kPath    = kFlag{name: "path", key: "path", help: "Canonical read-only /knowledge path.", def: "/knowledge"}
	kCursor  = kFlag{name: "cursor", key: "cursor", help: "Knowledge command cursor."}
	kOldPath = kFlag{name: "old-path", key: "old_path", help: "Knowledge command old-path."}
	kNewPath = kFlag{name: "new-path", key: "new_path", help: "Knowledge command new-path."}
	kNodeID  = kFlag{name: "node-id", key: "node_id", help: "Knowledge command node-id."}
	kReceipt = kFlag{name: "receipt", key: "receipt_id", help: "Knowledge command receipt."}
	kItemID  = kFlag{name: "item-id", key: "item_id", help: "Knowledge command item-id."}
	kLimit   = kFlag{name: "limit", key: "limit", isInt: true, intDef: 10,
		help: "Maximum returned items/segments (1–50); retrieval depth still belongs to the space profile."}
	kDepth = kFlag{name: "depth", key: "depth", isInt: true, intDef: 2, help: "Maximum tree depth (1–4)."}
)

// kSub is one subcommand: its short help and flags, in body order.
type kSub struct {
	name, short string
	flags       []kFlag
	images      bool // --image-file-id
}

var knowledgeSubs = []kSub{
	{"spaces", "List only spaces bound to this Agent and their current availability.", nil, false},
	{"capabilities", "Inspect this space's current capabilities (no model credentials).", []kFlag{kSpace}, false},
	{"search", "Retrieve evidence using the space profile; no nested planner or generated answer.", []kFlag{kSpace, kQuery, kLimit}, true},
	{"ls", "List a bounded page of /knowledge entries.", []kFlag{kSpace, kPath, kCursor, kLimit}, false},
	{"tree", "Browse a bounded /knowledge subtree.", []kFlag{kSpace, kPath, kCursor, kLimit, kDepth}, false},
	{"find", "Find /knowledge entries whose names contain the query.", []kFlag{kSpace, kPath, kQuery, kCursor, kLimit}, false},
	{"grep", "Search text inside /knowledge with a bounded server timeout.", []kFlag{kSpace, kPath, kQuery, kCursor, kLimit}, false},
	{"cat", "Read a page of text. Raw manifests and binary artifacts are not exposed.", []kFlag{kSpace, kPath, kCursor, kLimit}, false},
	{"stat", "Inspect safe metadata for one /knowledge path.", []kFlag{kSpace, kPath}, false},
	{"diff", "Compare two readable paths without an LLM semantic-diff call.", []kFlag{kSpace, kOldPath, kNewPath}, false},
	{"open", "Open a node ID or validate/reopen a trusted evidence receipt.", []kFlag{kSpace, kNodeID, kReceipt}, false},
	{"images", "List image items and captions from a receipt's immutable document artifact.", []kFlag{kSpace, kReceipt, kCursor, kLimit}, false},
	{"image", "Deliver one bounded image to a vision-capable Agent via the trusted runtime channel.", []kFlag{kSpace, kReceipt, kItemID}, false},
}

func (a *app) knowledgeCmd() *cobra.Command {
	var version bool
	c := &cobra.Command{
		Use:   "knowledge [--protocol-version | COMMAND [flags]]",
		Short: "Autonomously inspect read-only Agentic Knowledge evidence. All results are JSON.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if version {
				_, err := fmt.Fprintf(a.stdout, "%d\n", knowledgeProtocol)
				return err
			}
			return cmd.Help()
		},
	}
	c.Flags().BoolVar(&version, "protocol-version", false, "Print the locally supported knowledge protocol version.")
	for _, sub := range knowledgeSubs {
		c.AddCommand(a.knowledgeSubCmd(sub))
	}
	return c
}

func (a *app) knowledgeSubCmd(sub kSub) *cobra.Command {
	var commandID string
	var asJSON bool
	var images []string
	strs := map[string]*string{}
	ints := map[string]*int{}
	use := sub.name + " [flags]"
	c := &cobra.Command{
		Use:   use,
		Short: sub.short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.backend()
			if err != nil {
				return err
			}
			id := strings.ToLower(commandID)
			if id == "" {
				id = newUUID()
			}
			body := newOrdered()
			body.add("version", knowledgeProtocol)
			body.add("command", sub.name)
			body.add("command_id", id)
			for _, f := range sub.flags {
				if f.isInt {
					body.add(f.key, *ints[f.name])
				} else if v := *strs[f.name]; v != "" {
					body.add(f.key, v)
				}
			}
			if sub.images && len(images) > 0 {
				ids, err := imageIDs(images)
				if err != nil {
					return err
				}
				body.add("image_file_ids", ids)
			}
			raw := body.bytes()
			if len(raw) > knowledgeInputLimit {
				return plainf("knowledge command exceeds the input limit")
			}
			timeout := agentstub.KnowledgeTimeout
			if v := a.getenv(agentstub.EnvTestKnowledgeTimeout); v != "" {
				if d, err := time.ParseDuration(v); err == nil && d > 0 {
					timeout = d
				}
			}
			reply, err := c.Knowledge(ctxOf(cmd), raw, timeout, knowledgeOutputLimit)
			if err != nil {
				return plainf("%v", err)
			}
			if reply.Over {
				return plainf("%v", agentstub.ErrKnowledgeIncomplete)
			}
			if reply.Status >= 400 {
				return plainf("%s", agentstub.StubText(agentstub.StatusError(reply.Status, reply.Body)))
			}
			if !knowledgeEnvelopeOK(reply.Body, id, sub.name) {
				return plainf("incompatible knowledge CLI protocol; deploy matching Agent Stub and sandbox versions")
			}
			var out bytes.Buffer
			if err := json.Compact(&out, reply.Body); err != nil {
				return plainf("incompatible knowledge CLI protocol; deploy matching Agent Stub and sandbox versions")
			}
			out.WriteByte('\n')
			_, err = a.stdout.Write(out.Bytes())
			return err
		},
	}
	fl := c.Flags()
	fl.StringVar(&commandID, "command-id", "", "Logical UUID for this command; generated by default. Reusing it will not repeat retrieval.")
	fl.BoolVar(&asJSON, jsonFlag, true, "Emit complete JSON (always enabled).")
	for _, f := range sub.flags {
		if f.isInt {
			ints[f.name] = fl.Int(f.name, f.intDef, f.help)
		} else {
			strs[f.name] = fl.String(f.name, f.def, f.help)
		}
	}
	if sub.images {
		fl.StringArrayVar(&images, "image-file-id", nil,
			"Authorized upload UUID or local_file dify-file-ref from inputs; repeat at most four times, never a URL.")
	}
	return c
}

// knowledgeEnvelopeOK checks the result envelope against what was sent.
func knowledgeEnvelopeOK(body []byte, id, command string) bool {
	var env struct {
		Version   *int    `json:"version"`
		CommandID *string `json:"command_id"`
		Command   *string `json:"command"`
		Status    *string `json:"status"`
	}
	if json.Unmarshal(body, &env) != nil {
		return false
	}
	return env.Version != nil && *env.Version == knowledgeProtocol &&
		env.CommandID != nil && *env.CommandID == id &&
		env.Command != nil && *env.Command == command &&
		env.Status != nil && *env.Status == "ok"
}

// imageIDs reduces --image-file-id values to lower-case upload UUIDs.
func imageIDs(values []string) ([]string, error) {
	if len(values) > maxQueryImages {
		return nil, plainf("knowledge search accepts at most four query images")
	}
	ids := make([]string, 0, len(values))
	for _, v := range values {
		if len(v) > maxImageRefLen {
			return nil, plainf("knowledge query image reference exceeds the input limit")
		}
		if strings.HasPrefix(v, fileRefPrefix) {
			id, ok := refRecordID(v)
			if !ok {
				return nil, plainf("invalid knowledge query image reference")
			}
			v = id
		}
		if !uuidPattern.MatchString(v) {
			return nil, plainf("knowledge query images require a local_file upload UUID or canonical reference, not a URL")
		}
		ids = append(ids, strings.ToLower(v))
	}
	return ids, nil
}

// newUUID returns a random version-4 UUID.
func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// ordered is a JSON object whose keys keep the order they were added in.
type ordered struct{ buf bytes.Buffer }

func newOrdered() *ordered { o := &ordered{}; o.buf.WriteByte('{'); return o }

func (o *ordered) add(k string, v any) {
	if o.buf.Len() > 1 {
		o.buf.WriteByte(',')
	}
	kb, _ := marshalNoHTML(k)
	vb, _ := marshalNoHTML(v)
	o.buf.Write(kb)
	o.buf.WriteByte(':')
	o.buf.Write(vb)
}

func (o *ordered) bytes() []byte { return append(append([]byte(nil), o.buf.Bytes()...), '}') }

func marshalNoHTML(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
