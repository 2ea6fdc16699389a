# The planning service image: one image for every target.
#
#   docker build -t planning-service:dev .
#   docker run --rm --read-only --tmpfs /tmp -p 8080:8080 -v planning-data:/data planning-service:dev   # all-in-one
#   docker run --rm planning-service:dev --target=issues --print-config                                # one service
#
# Stages: manifests (the files pnpm install reads) -> build (install, bundle with esbuild, deploy
# the bundle's external packages from the lockfile) -> runtime (the final image).
# Plain Dockerfile syntax: builds with BuildKit, the classic builder, Buildah and Kaniko alike.

# Node.js 24 (Active LTS) on Debian 13 "trixie", pinned by the digest of its multi-platform image
# index (linux/amd64, arm64, ppc64le, s390x), so every build starts from the same bytes. This index
# is Node 24.20.0; refresh the pin (tag and digest together) for Node and Debian security updates,
# see docs/operations.md, "Updating the base image".
ARG NODE_IMAGE=node:24.20.0-trixie-slim@sha256:50c3b2f6988dfc307b86e5301d69611af31f4789bdf232863b07d3b02fe55ae0

# ---- manifests -------------------------------------------------------------------------------
# Copies out only what `pnpm install` reads, with the workspace layout intact. A source change
# changes nothing here, so the build stage's install layer below stays cached. If the workspace
# ever gains pnpm patches (patchedDependencies), copy that folder here too.
FROM ${NODE_IMAGE} AS manifests
WORKDIR /src
COPY . .
RUN mkdir -p /manifests \
 && cp package.json pnpm-lock.yaml pnpm-workspace.yaml /manifests/ \
 && if [ -f .npmrc ]; then cp .npmrc /manifests/; fi \
 && for f in libs/*/package.json services/*/package.json image/package.json; do \
      mkdir -p "/manifests/$(dirname "$f")" && cp "$f" "/manifests/$f"; \
    done

# ---- build -----------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /src
# A compiler for native addons whose prebuilt binary cannot be fetched (better-sqlite3 falls back
# to node-gyp). node-gyp takes the headers from this Node installation instead of downloading them.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
ENV npm_config_nodedir=/usr/local
# pnpm 10 from npm, at the exact version package.json's packageManager names (corepack cannot be
# used on our builders; pnpm would otherwise fetch that version itself on first run).
COPY package.json ./
RUN PNPM="$(node -p "(require('./package.json').packageManager || 'pnpm@10').split('+')[0]")" \
 && case "$PNPM" in pnpm@10*) ;; *) echo "expected pnpm 10 in packageManager, found $PNPM" >&2; exit 1 ;; esac \
 && npm install -g "$PNPM" --no-fund --no-audit --loglevel=error \
 && pnpm --version
COPY --from=manifests /manifests/ ./
RUN pnpm install --frozen-lockfile
# Only what the bundle is built from (.dockerignore keeps tests and node_modules out).
COPY tsconfig.base.json tsconfig.json ./
COPY scripts/build.mjs scripts/check-image-deps.mjs scripts/
COPY src/ src/
COPY libs/ libs/
COPY services/ services/
# Writes dist/main.mjs (+ source map, legal notices) and dist/package.json, whose dependencies
# are the packages left out of the bundle: native addons and packages that read files from their
# own folder at run time.
RUN pnpm build
# Those packages come from the workspace package image/, at the versions pnpm-lock.yaml holds
# (their dependencies too): `pnpm deploy` installs exactly what the tests ran with, compiling
# native addons for this Node. The check stops the build when the bundle needs a package, or a
# version, that image/package.json does not name.
RUN node scripts/check-image-deps.mjs dist/package.json image/package.json \
 && pnpm --filter @planning/image-deps --config.inject-workspace-packages=true \
      deploy --prod --frozen-lockfile /deploy \
 && rm -f /deploy/pnpm-lock.yaml /deploy/package.json

# ---- runtime ---------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime
ARG NODE_IMAGE
ARG VERSION=dev
ARG REVISION=""
ARG CREATED=""
ARG SOURCE=""
LABEL org.opencontainers.image.title="planning-service" \
      org.opencontainers.image.description="Planning service for AI coding agents: gateway, issues, agents-claims, imports-exports and audit in one image (--target selects)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${NODE_IMAGE}"

# MALLOC_ARENA_MAX=2: at most two glibc malloc arenas for the process's threads (about 16 MB less
# idle RSS with the services' thread; scripts/node-flags.mjs, BUNDLE_ENV).
ENV NODE_ENV=production \
    DATA_DIR=/data \
    MALLOC_ARENA_MAX=2

WORKDIR /app
# Owned by root and read-only to the service user: the process cannot modify its own code. The
# process writes only to /data (all-in-one's DATA_DIR) and /tmp, so the container runs with a
# read-only root filesystem (docker run --read-only --tmpfs /tmp; the Helm chart sets
# readOnlyRootFilesystem and mounts an emptyDir on /tmp).
COPY --from=build /deploy/node_modules ./node_modules
COPY --from=build /src/dist/ ./

# All-in-one keeps the embedded store here (DATA_DIR). Distributed targets use MongoDB and never
# write it; the Helm chart clears DATA_DIR for them.
RUN mkdir -p /data && chown 1000:1000 /data
VOLUME ["/data"]

# The base image's "node" user, by number so Kubernetes can verify runAsNonRoot.
USER 1000:1000

# HTTP (REST, MCP, probes), gRPC, and the Prometheus scrape endpoint (METRICS_PORT).
EXPOSE 8080 50051 9464

# For Docker and Compose; Kubernetes ignores this and uses the chart's probes. Slim images have no
# curl, so node asks.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8080) + '/live').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]

# Arguments go to the service: `docker run IMAGE --target=gateway`. The default target is all.
# Without --enable-source-maps: with it Node parses every chunk's source map (20 MB, with the
# sources) at load, about 58 MiB more RSS per process and a slower start (measured, docs/deployment.md);
# the bundle keeps function names, so stacks stay readable. The maps ship beside the bundle:
# NODE_OPTIONS=--enable-source-maps maps stacks back to the TypeScript sources when needed.
# --max-semi-space-size=4 keeps the main thread's young generation at 2 x 4 MB instead of the
# 2 x 16 MB V8 grows it to while the modules load (about 23 MB of RSS until the process's quiet
# start-up compaction; scripts/node-flags.mjs).
ENTRYPOINT ["node", "--max-semi-space-size=4", "/app/main.mjs"]
