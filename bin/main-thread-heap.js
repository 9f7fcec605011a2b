// The shebang's young-generation flags (--max-/--min-semi-space-size=64) are meant for the main
// thread, where the pipeline runs. V8 flags are process-wide, though: every isolate created after
// start-up got them too — above all Node's module-hooks thread, in which tsx compiles the
// TypeScript sources and the configuration module and which then stays idle for the life of the
// process. With a 64 MiB minimum semi-space its young generation held 113–126 MiB resident once
// it had scavenged (of 483–521 MiB peak RSS on the 150,000-row bulk test; the main thread's heap
// was 250–270 MiB). V8 reads these flags when it creates an isolate's heap, so setting them again
// before any other thread starts leaves the main thread's young generation as configured — same
// size, same scavenges — and gives every later thread 1 MiB semi-spaces. Not V8's default (up to
// 16 MiB each): a 1,000,000-row initial snapshot peaked at 371 MiB with 1 MiB against 397 MiB
// with the default, and loading the configuration took no longer (bench/results/2026-12-06-hooks-thread-heap.md).
// Import this before anything that may start a thread (test/unit/cli-thread-heaps.test.ts).
import v8 from 'node:v8';

v8.setFlagsFromString('--min-semi-space-size=1');
v8.setFlagsFromString('--max-semi-space-size=1');
