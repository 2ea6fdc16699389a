// The V8 flags every start command passes to `node` before the bundle: `pnpm start`
// (package.json), the image's ENTRYPOINT (Dockerfile; the Helm chart runs it unchanged), the
// Tiltfile's dev image, the image's runtime check and the HTTP benchmark's copies of the bundle.
// test/image/image.test.ts holds the Dockerfile, the Tiltfile and package.json to this list.
//
// --max-semi-space-size=4: the main thread's young generation (V8's new space) keeps two
// semi-spaces of at most 4 MB instead of V8's 16 MB. While the modules load the main thread
// allocates fast enough for V8 to grow the new space to 2 x 16 MB: about 23 MB more RSS until
// the start-up compaction gives it back once the process has been quiet for six seconds
// (libs/runtime/src/quiet-compaction.ts; V8's own memory reducer took about two idle minutes).
// V8 fixes the main isolate's semi-space limit when Node creates it, before any of the bundle
// runs, so only a flag can set it. The gateway's thread is not the busy one under writes, and the
// by-id and page rows of the HTTP benchmark stayed within their noise with it. The services'
// thread, busy under writes, gets V8's 16 MB (src/modules.ts raises the flag before it starts).
export const BUNDLE_NODE_FLAGS = ['--max-semi-space-size=4'];

// The environment every start command gives the bundle, beside the flags (the same places).
//
// MALLOC_ARENA_MAX=2: glibc's malloc gives each thread that allocates its own arena (up to 8 per
// core), and each arena keeps the pages it has touched. The bundle runs two JavaScript threads
// (the gateway's and the services') beside V8's and libuv's helper threads; with at most two
// arenas the idle RSS 3 s after start is about 16 MB lower (medians of six starts each, alternated,
// with the services' thread: 173 -> 157 MB; 10 s after start 159 -> 137 MB); with one thread the
// difference is within the noise. The by-id, PATCH and claim rows of the HTTP benchmark, run
// alternately with and without it, stayed within their noise. Other C libraries (musl) ignore it.
// The image's base is Debian (glibc); `pnpm start` sets it with env(1).
export const BUNDLE_ENV = { MALLOC_ARENA_MAX: '2' };
