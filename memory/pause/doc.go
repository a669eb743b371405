// Package pause decides when a loader pauses because its memory cgroup leaves it
// less than its floor, and when it resumes, and holds its reads while it is paused.
//
// A trainer's memory peaks (evaluation, a checkpoint, the first steps) and falls
// back. A loader that stops at a peak ends the training job as surely as an OOM
// kill; one that runs on at its floor takes the trainer's memory. A paused loader
// admits no reads, gives back what it can, and waits with its irreducible resident
// set until the peak is over; its consumer sees a delay, not an error.
//
// # What it owns
//
//   - [Controller]: from readings of what the cgroup leaves the loader now, it
//     pauses when that is below the floor, resumes once it is back above the floor
//     plus a hysteresis, and reports a pause that lasted longer than its timeout
//     (default [DefaultTimeout]; [Forever] waits without end). It counts pauses and
//     the time paused, and writes the line to show for each event.
//   - [Gate]: a [flow.Gate] in front of another that admits nothing while paused
//     (no permits, no trickle); reads already admitted finish.
//   - [Register]: psiflow_paused, psiflow_pauses_total and
//     psiflow_paused_seconds_total.
//
// # What it does not own
//
// What the loader gives back while paused and how it resumes (the memory runtime
// that uses this package), the headroom readings (package pressure) and the graph
// (package flow).
package pause
