// Timing support: a kernel that holds the stream for a while, so that the start event and the launch being
// timed queue up behind it. The measured interval then covers the kernel, not the host's time to issue it.
// And a kernel that does nothing, whose launch at a given shape is the floor under any kernel of that shape.
#include <drvtma/common.cuh>

extern "C" __global__ void hold_stream(u64 ns) {
    const u64 start = globaltimer_ns();
    while (globaltimer_ns() - start < ns) __nanosleep(500);
}

extern "C" __global__ void empty_kernel() {}
