// The V8 flags every start command passes to `node` before the bundle: `pnpm start`
// (package.json), the image's ENTRYPOINT (Dockerfile; the Helm chart runs it unchanged), the
// Tiltfile's dev image, the image's runtime check and the HTTP benchmark's copies of the bundle.
// test/image/image.test.ts holds the Dockerfile, the Tiltfile and package.json to this list.
//
// --max-semi-space-size=4: the main thread's young generation (V8's new space) keeps two
// semi-spaces of at most 4 MB instead of V8's 16 MB. While the modules load the main thread
// allocates fast enough for V8 to grow the new space to 2 x 16 MB, and the pages stay resident
// until V8's memory reducer gives them back after about two idle minutes: about 23 MB of the idle
// RSS (203 -> 180 MB with the services' thread, measured with bench/heap-probe.mjs). Nothing from
// inside the process can do it: V8 fixes the main isolate's semi-space limit when Node creates it,
// and a forced collection does not shrink the new space. The services' thread already runs with
// the same nursery (resourceLimits.maxYoungGenerationSizeMb 12 = three 4 MB semi-spaces, src/modules.ts).
// Smaller (1 or 2 MB) promotes more short-lived objects to the old space and saved nothing more.
export const BUNDLE_NODE_FLAGS = ['--max-semi-space-size=4'];
