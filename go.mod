module github.com/psiflow/psiflow

go 1.26.0

require (
	github.com/NVIDIA/go-nvml v0.13.4-1 // indirect
	github.com/apache/arrow-go/v18 v18.8.0 // indirect
	github.com/ebitengine/purego v0.11.3 // indirect
	github.com/goccy/go-yaml v1.19.2 // indirect
	github.com/klauspost/cpuid/v2 v2.4.0 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/reugn/go-streams v0.12.0 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
