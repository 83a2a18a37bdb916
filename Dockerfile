# Build the manager binary. No Docker engine runs on the development machines; this file is kept
# correct by reading, and nothing in the build or tests depends on it.
FROM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=devel
ARG COMMIT=

WORKDIR /workspace
# Cache dependencies before copying the source, so a source change does not re-download them.
COPY go.mod go.mod
COPY go.sum go.sum
RUN go mod download

COPY api/ api/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY webhooks/ webhooks/
COPY pkg/ pkg/
COPY internal/ internal/

# hack/static-build.sh: CGO_ENABLED=0 (the SQLite driver is pure Go, so the binary is static and
# runs on distroless), the same build hack/cluster/images.sh puts into the test cluster's image.
COPY hack/static-build.sh hack/static-build.sh
RUN VERSION=${VERSION} COMMIT=${COMMIT} GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    hack/static-build.sh manager ./cmd/manager

FROM gcr.io/distroless/static:nonroot
WORKDIR /
COPY --from=builder /workspace/manager .
USER 65532:65532

ENTRYPOINT ["/manager"]
