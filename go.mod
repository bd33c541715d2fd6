module github.com/sbxhq/sbx

go 1.25

require (
	github.com/go-json-experiment/json v0.0.0-20250725192818-e39067aee2d2
	github.com/google/go-cmp v0.7.0
	github.com/google/go-containerregistry v0.20.2
	github.com/google/nftables v0.3.0
	github.com/moby/patternmatcher v0.6.1
	github.com/rogpeppe/go-internal v1.16.0
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	github.com/spf13/pflag v1.1.0
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/sys v0.28.0
	golang.org/x/term v0.27.0
)

require (
	github.com/mdlayher/netlink v1.7.3-0.20250113171957-fbb4dce95f42 // indirect
	github.com/mdlayher/socket v0.5.0 // indirect
	golang.org/x/net v0.33.0 // indirect
	golang.org/x/sync v0.10.0 // indirect
	golang.org/x/text v0.21.0 // indirect
	golang.org/x/tools v0.26.0 // indirect
)
