package fakestub

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/shellctl/shellctl/internal/httperr"
)

// DriveItem is one entry of the fake's drive.
type DriveItem struct {
	Key      string
	Data     []byte
	Size     *int64 // the size the manifest claims; nil: len(Data)
	NullSize bool   // the manifest says "size": null
	MimeType string // "" is sent as null
	Hash     string // "" is sent as null; see hashOf
	NoURL    bool   // no download_url even when one was asked for
	IsSkill  bool
	FileID   string
	Extra    map[string]any // unknown fields a client must ignore
}

func hashOf(b []byte) string { h := sha256.Sum256(b); return "sha256:" + hex.EncodeToString(h[:]) }

func i64(n int64) *int64 { return &n }

// Keys of the canned drive that a pull must refuse.
var HostileDriveKeys = []string{"../escape.txt", "a/../../escape", "/etc/x"}

// cannedDrive is the drive a new fake starts with: what agent-cli-backend.md
// asks for, in this (the server's) order.
func cannedDrive() []*DriveItem {
	mk := func(key, data, mime string) *DriveItem {
		return &DriveItem{Key: key, Data: []byte(data), MimeType: mime, Hash: hashOf([]byte(data)), FileID: newUUID()}
	}
	items := []*DriveItem{
		mk("docs/a/b.txt", "nested file\n", "text/plain"),
		mk("docs/readme.md", "# Drive\n", "text/markdown"),
		mk("skills/x/SKILL.md", "---\nname: x\n---\nA skill.\n", "text/markdown"),
		mk("skills/x/.DIFY-SKILL-FULL.zip", "PK\x05\x06"+strings.Repeat("\x00", 18), "application/zip"),
		mk("sizes/wrong.txt", "twelve bytes", "text/plain"),
		mk("nourl/item.txt", "no url\n", "text/plain"),
		mk(HostileDriveKeys[0], "escaped\n", "text/plain"),
		mk(HostileDriveKeys[1], "escaped\n", "text/plain"),
		mk(HostileDriveKeys[2], "root:x\n", "text/plain"),
		{Key: "extra/fields.json", Data: []byte("{}\n"), NullSize: true, FileID: newUUID(),
			Extra: map[string]any{"future_field": "ignored", "nested": map[string]any{"a": 1}}},
	}
	items[2].IsSkill, items[3].IsSkill = true, true
	items[4].Size = i64(99)
	items[5].NoURL = true
	return items
}

// SetDrive replaces the drive's items.
func (s *Server) SetDrive(items []*DriveItem) { s.mu.Lock(); s.drive = items; s.mu.Unlock() }

// Drive returns the drive's items.
func (s *Server) Drive() []*DriveItem {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*DriveItem(nil), s.drive...)
}

// driveItem returns the item of key; s.mu must be held.
func (s *Server) driveItem(key string) *DriveItem {
	for _, it := range s.drive {
		if it.Key == key {
			return it
		}
	}
	return nil
}

func (s *Server) itemJSON(r *http.Request, it *DriveItem, withURL bool) map[string]any {
	m := map[string]any{}
	for k, v := range it.Extra {
		m[k] = v
	}
	var size any = int64(len(it.Data))
	if it.Size != nil {
		size = *it.Size
	}
	if it.NullSize {
		size = nil
	}
	null := func(v string) any {
		if v == "" {
			return nil
		}
		return v
	}
	m["key"] = it.Key
	m["size"] = size
	m["hash"] = null(it.Hash)
	m["mime_type"] = null(it.MimeType)
	m["file_kind"] = "tool_file"
	m["file_id"] = it.FileID
	m["created_at"] = 1767225600
	m["download_url"] = nil
	m["value_owned_by_drive"] = true
	m["removed"] = false
	m["is_skill"] = it.IsSkill
	m["skill_metadata"] = nil
	if withURL && !it.NoURL {
		m["download_url"] = baseURL(r) + signedPrefix + "download/" + s.issue(ticket{download: true, kind: "drive", name: it.Key})
	}
	return m
}

func (s *Server) driveManifest(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !q.Has("prefix") || !q.Has("include_download_url") {
		writeValidation(w, "prefix", "prefix and include_download_url are required by this fake")
		return
	}
	withURL := q.Get("include_download_url") == "true"
	prefix := q.Get("prefix")
	items := []map[string]any{}
	for _, it := range s.Drive() {
		if strings.HasPrefix(it.Key, prefix) {
			items = append(items, s.itemJSON(r, it, withURL))
		}
	}
	httperr.WriteJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (s *Server) driveCommit(w http.ResponseWriter, r *http.Request, body []byte) {
	m, ok := strictObject(w, body, []string{"items"})
	if !ok {
		return
	}
	var raw []json.RawMessage
	if json.Unmarshal(m["items"], &raw) != nil || len(raw) == 0 {
		writeValidation(w, "items", "a non-empty list is required")
		return
	}
	var added []*DriveItem
	for _, ri := range raw {
		it, ok := strictObjectRaw(ri, []string{"key", "file_ref"}, "value_owned_by_drive", "is_skill", "skill_metadata")
		if !ok {
			writeValidation(w, "items", "each item is {key, file_ref} (value_owned_by_drive, is_skill, skill_metadata optional)")
			return
		}
		key, _ := str(it["key"])
		ref, ok := strictObjectRaw(it["file_ref"], []string{"kind", "id"})
		kind, _ := str(ref["kind"])
		id, _ := str(ref["id"])
		if key == "" || !ok || kind != "tool_file" {
			writeValidation(w, "file_ref", "file_ref must be {kind: tool_file, id}")
			return
		}
		data, found := s.UploadedData(id)
		if !found {
			writeValidation(w, "file_ref", "no uploaded tool_file "+id)
			return
		}
		s.mu.Lock()
		mime := s.uploads[id].mimetype
		s.mu.Unlock()
		added = append(added, &DriveItem{Key: key, Data: data, MimeType: mime, Hash: hashOf(data), FileID: id,
			IsSkill: strings.HasSuffix(key, "/SKILL.md") || strings.HasSuffix(key, "/.DIFY-SKILL-FULL.zip")})
	}
	s.mu.Lock()
	for _, a := range added {
		if old := s.driveItem(a.Key); old != nil {
			*old = *a
		} else {
			s.drive = append(s.drive, a)
		}
	}
	s.mu.Unlock()
	out := make([]map[string]any, 0, len(added))
	for _, a := range added {
		out = append(out, s.itemJSON(r, a, false))
	}
	httperr.WriteJSON(w, http.StatusOK, map[string]any{"items": out})
}
