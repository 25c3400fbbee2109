# Multi-stage build of the image the Deployment in manifests/base names:
# a static binary on distroless, running as the nonroot user (65532).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY policies/ policies/
COPY webhook/ webhook/
COPY certs/ certs/
COPY lifecycle/ lifecycle/
COPY externalurl/ externalurl/
COPY audit/ audit/
COPY internal/ internal/
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /podpatch ./cmd/podpatch

FROM gcr.io/distroless/static:nonroot
COPY --from=build /podpatch /podpatch
USER 65532:65532
ENTRYPOINT ["/podpatch"]
CMD ["serve"]
