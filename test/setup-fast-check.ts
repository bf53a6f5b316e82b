import fc from 'fast-check';

// Property tests in CI are reproducible: a fixed seed unless FC_SEED says otherwise (FC_SEED=random explores).
// bench/fuzz.mjs is where new seeds are explored at volume.
const seed = process.env.FC_SEED;
if (seed !== 'random') fc.configureGlobal({ seed: seed ? Number(seed) : 20_261_130 });
