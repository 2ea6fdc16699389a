# The planning service image: one image for every target.
#
#   docker build -t planning-service:dev .
#   docker run --rm -p 8080:8080 -v planning-data:/data planning-service:dev        # all-in-one
#   docker run --rm planning-service:dev --target=issues --print-config             # one service
#
# Stages: manifests (the files pnpm install reads) -> build (install, bundle with esbuild) ->
# runtime-deps (the few packages the bundle keeps external) -> runtime (the final image).
# Plain Dockerfile syntax: builds with BuildKit, the classic builder, Buildah and Kaniko alike.

ARG NODE_IMAGE=node:20-bookworm-slim

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
 && for f in libs/*/package.json services/*/package.json; do \
      mkdir -p "/manifests/$(dirname "$f")" && cp "$f" "/manifests/$f"; \
    done

# ---- build -----------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /src
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
COPY scripts/build.mjs scripts/
COPY src/ src/
COPY libs/ libs/
COPY services/ services/
# Writes dist/main.mjs (+ source map, legal notices) and dist/package.json, whose dependencies
# are the packages left out of the bundle: a native addon and packages that read .proto files.
RUN pnpm build

# ---- runtime-deps ----------------------------------------------------------------------------
# Installed on the same base image as the runtime, so the native addon's prebuilt binary matches.
# No install scripts are needed (the addon ships prebuilt per platform), so none run.
FROM ${NODE_IMAGE} AS runtime-deps
WORKDIR /app
COPY --from=build /src/dist/package.json ./
RUN npm install --omit=dev --no-fund --no-audit --ignore-scripts --loglevel=error

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

ENV NODE_ENV=production \
    DATA_DIR=/data

WORKDIR /app
# Owned by root and read-only to the service user: the process cannot modify its own code.
COPY --from=runtime-deps /app/node_modules ./node_modules
COPY --from=build /src/dist/ ./

# All-in-one keeps the embedded store here (DATA_DIR). Distributed targets use MongoDB and never
# write it; the Helm chart clears DATA_DIR for them.
RUN mkdir -p /data && chown 1000:1000 /data
VOLUME ["/data"]

# The base image's "node" user, by number so Kubernetes can verify runAsNonRoot.
USER 1000:1000

EXPOSE 8080 50051

# For Docker and Compose; Kubernetes ignores this and uses the chart's probes. Slim images have no
# curl, so node asks.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8080) + '/live').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]

# Arguments go to the service: `docker run IMAGE --target=gateway`. The default target is all.
ENTRYPOINT ["node", "--enable-source-maps", "/app/main.mjs"]
