# Toolbelt container image.
#
#   docker build -t toolbelt .
#   docker run -p 8080:8080 -v toolbelt-data:/var/lib/toolbelt/data toolbelt
#
# The first start prints the admin API key on stdout (see `docker logs`), or
# takes TOOLBELT_ADMIN_KEY from the environment.

# --- build: cgo is required (mattn/go-sqlite3); gcc ships in this image ----
FROM golang:1.26-bookworm AS build

ENV CGO_ENABLED=1
# gin's MessagePack binding is never used; leaving it out saves 9 MB.
ENV GOFLAGS=-tags=nomsgpack
WORKDIR /src

# Dependencies first, so this layer is reused until go.mod or go.sum change
# (and the module go.mod replaces with a local one, third_party/noquic).
COPY go.mod go.sum ./
COPY third_party/noquic third_party/noquic
RUN go mod download

# Generated code (templ components, OpenAPI document) is committed, so the
# build needs no generators.
COPY . .
RUN go build -trimpath -ldflags="-s -w" -o /out/toolbelt .

# --- runtime ----------------------------------------------------------------
FROM debian:bookworm-slim

# ca-certificates: outbound TLS. tini: an init that reaps the orphans of
# sandboxed subprocesses and Chromium. bubblewrap, chromium, python3, nodejs:
# what the sandbox and the built-in tools (browser_navigate, code_execute) run.
RUN apt-get update \
	&& DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
		ca-certificates \
		tini \
		bubblewrap \
		chromium \
		python3 \
		nodejs \
	&& rm -rf /var/lib/apt/lists/*

# An unprivileged user owning the data directory and its sessions
# directory. They are created and chowned before VOLUME, so a new named
# volume mounted on either (deploy/compose.yaml mounts one on sessions)
# starts with this owner rather than root.
RUN groupadd --system --gid 10001 toolbelt \
	&& useradd --system --uid 10001 --gid toolbelt \
		--home-dir /var/lib/toolbelt --create-home --shell /usr/sbin/nologin toolbelt \
	&& mkdir -p /var/lib/toolbelt/data/sessions \
	&& chown -R toolbelt:toolbelt /var/lib/toolbelt

COPY --from=build /out/toolbelt /usr/local/bin/toolbelt

ENV TOOLBELT_ADDR=:8080 \
	TOOLBELT_DATA_DIR=/var/lib/toolbelt/data
WORKDIR /var/lib/toolbelt
EXPOSE 8080
VOLUME ["/var/lib/toolbelt/data"]

# Numeric, so orchestrators can verify the image does not run as root.
USER 10001:10001

# Liveness through python3 (already installed for code_execute), so no curl
# is needed. It follows the port of TOOLBELT_ADDR and bypasses any proxy
# variables; a non-2xx answer or no answer exits non-zero.
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
	CMD ["python3", "-c", "import os, urllib.request as u; port = (os.environ.get('TOOLBELT_ADDR') or ':8080').rsplit(':', 1)[-1]; u.build_opener(u.ProxyHandler({})).open('http://127.0.0.1:' + port + '/healthz', timeout=4)"]

# The server drains for up to 20 s on SIGTERM: give it that with
# `docker stop -t 25` (the default waits 10 s).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/toolbelt"]
CMD ["serve"]
