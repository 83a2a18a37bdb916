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

# CGO_ENABLED=0: the SQLite driver is pure Go, so the binary is static and runs on distroless.
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w -X github.com/harness-dev/planmode-operator/internal/version.Version=${VERSION} -X github.com/harness-dev/planmode-operator/internal/version.Commit=${COMMIT}" -o manager ./cmd/manager

FROM gcr.io/distroless/static:nonroot
WORKDIR /
COPY --from=builder /workspace/manager .
USER 65532:65532

ENTRYPOINT ["/manager"]
