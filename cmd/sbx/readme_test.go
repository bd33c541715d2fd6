package main

import (
	"os"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/spec"
)

// TestReadmePresets keeps the README's preset table equal to the presets
// sbx enforces.
func TestReadmePresets(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	for _, name := range spec.PresetNames() {
		row := "| `" + name + "`"
		i := strings.Index(readme, row)
		if i < 0 {
			t.Errorf("README has no row for preset %s", name)
			continue
		}
		line := readme[i : i+strings.Index(readme[i:], "\n")]
		cells := strings.Split(line, "|")
		want := strings.Join(spec.PresetHosts(name), ", ")
		if got := strings.TrimSpace(cells[2]); got != want {
			t.Errorf("README preset %s:\n got %s\nwant %s", name, got, want)
		}
	}
}
