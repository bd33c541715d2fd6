package spec

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAgentsAgreeWithSchema: the schema's enum of agent is the list of
// agents sbx knows, in the same order (editors show it), and each agent
// has its facts.
func TestAgentsAgreeWithSchema(t *testing.T) {
	data, err := os.ReadFile("../schema/sandbox.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Properties struct {
			Agent struct {
				Enum []string `json:"enum"`
			} `json:"agent"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Agents, doc.Properties.Agent.Enum); diff != "" {
		t.Errorf("spec.Agents and the schema's agent enum differ (-spec +schema):\n%s", diff)
	}
	for _, a := range Agents {
		if _, ok := agents[a]; !ok {
			t.Errorf("agent %q has no facts in agents", a)
		}
		if p := AgentOf(a).Preset; p != "" && presets[p] == nil {
			t.Errorf("agent %q names preset %q, which does not exist", a, p)
		}
	}
	if len(agents) != len(Agents) {
		t.Errorf("agents has %d entries, Agents lists %d", len(agents), len(Agents))
	}
}

// TestAgentKeyHosts: the hosts an agent's key goes to are in its preset
// (so the secret sbx init writes passes the check that its hosts are
// allowed), each agent with key hosts has a key and a key prefix.
func TestAgentKeyHosts(t *testing.T) {
	for _, a := range Agents {
		ag := AgentOf(a)
		if len(ag.KeyHosts) == 0 {
			continue
		}
		if ag.Key == "" || ag.KeyPrefix == "" {
			t.Errorf("agent %q has key hosts but key %q, prefix %q", a, ag.Key, ag.KeyPrefix)
		}
		for _, h := range ag.KeyHosts {
			if !slices.Contains(presets[ag.Preset], h) {
				t.Errorf("agent %q sends its key to %s, which its preset %q does not allow", a, h, ag.Preset)
			}
		}
	}
}
