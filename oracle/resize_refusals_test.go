//go:build k8s_1_32 || k8s_1_33

package main

// The resizes whose answer the container status decides, which the
// harness refuses (resize_init_memory.go, resizeModelled in
// resize_1_32.go) exactly where topoalign does: both replay the table
// testdata/resize-refusals.json (topoalign:
// crates/scenario/tests/resize_refusals.rs), this build's release's cases.
//
//	go test -modfile versions/1.33/go.mod -tags k8s_1_33 -run TestResizeRefusals .

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

type refusalCase struct {
	Release string         `json:"release"`
	Name    string         `json:"name"`
	Base    string         `json:"base"`
	Set     map[string]any `json:"set"`
	Refused bool           `json:"refused"`
}

// setPointer sets the JSON pointer path of doc (its parent must exist).
func setPointer(t *testing.T, doc any, pointer string, value any) {
	t.Helper()
	parts := strings.Split(pointer, "/")[1:]
	node := doc
	for _, p := range parts[:len(parts)-1] {
		switch v := node.(type) {
		case map[string]any:
			node = v[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i >= len(v) {
				t.Fatalf("%s: no %s", pointer, p)
			}
			node = v[i]
		default:
			t.Fatalf("%s: no %s", pointer, p)
		}
	}
	last := parts[len(parts)-1]
	switch v := node.(type) {
	case map[string]any:
		v[last] = value
	case []any:
		i, err := strconv.Atoi(last)
		if err != nil || i >= len(v) {
			t.Fatalf("%s: no %s", pointer, last)
		}
		v[i] = value
	default:
		t.Fatalf("%s: parent missing", pointer)
	}
}

func TestResizeRefusals(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "testdata", "resize-refusals.json"))
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Cases []refusalCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &table); err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, c := range table.Cases {
		if c.Release != kubeletMinor {
			continue
		}
		ran++
		t.Run(c.Name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("..", "testdata", "conformance", c.Base))
			if err != nil {
				t.Fatal(err)
			}
			var scenario any
			if err := json.Unmarshal(raw, &scenario); err != nil {
				t.Fatal(err)
			}
			for pointer, value := range c.Set {
				setPointer(t, scenario, pointer, value)
			}
			body, err := json.Marshal(scenario)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "scenario.json")
			if err := os.WriteFile(path, body, 0o644); err != nil {
				t.Fatal(err)
			}
			doc, code := replay(t, path)
			msg, _ := doc["error"].(string)
			if c.Refused {
				if code != 1 || !strings.Contains(msg, ".resize: not modelled: ") || !strings.Contains(msg, "allocatedResources") {
					t.Errorf("want a refusal (exit 1, not modelled), got exit %d: %v", code, doc)
				}
				return
			}
			if code != 0 || msg != "" || doc["results"] == nil {
				t.Errorf("want an answer, got exit %d: %v", code, doc)
			}
		})
	}
	if ran < 8 {
		t.Fatalf("%d cases for v%s in the table", ran, kubeletMinor)
	}
}
