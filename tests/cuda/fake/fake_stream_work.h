/* Device work of the fake cuBLAS, cuBLASLt and cuDNN, ordered on a stream of
 * the fake CUDA runtime: fn(work) runs at the call, or, on a stream under
 * capture, is recorded into the graph and runs at every cudaGraphLaunch, as
 * a kernel would (so a replay computes from the inputs as they are at that
 * launch). `work` is a malloc'ed copy of everything fn needs: the caller's
 * descriptors and scalars may be gone by the time a replay runs. It is freed
 * after a run at the call; a recorded one is kept by the fake runtime.
 *
 * The runtime is the fake cudart the shims opened (SHIMKIT_CUDART), found
 * without loading it again. Without one, or with FAKE_CUDA_WORK_AT_CALL=1
 * (the negative control: what the fakes did before, so a replay repeats
 * nothing of theirs), fn runs at the call. */
#ifndef FAKE_STREAM_WORK_H_
#define FAKE_STREAM_WORK_H_

#include <dlfcn.h>
#include <stdlib.h>

typedef int (*FakeRecordWork)(void* stream, void (*fn)(void*), void* work);

static FakeRecordWork fake_record_work(void) {
  static FakeRecordWork record = NULL;
  static int looked = 0;
  if (!looked) {
    looked = 1;
    const char* at_call = getenv("FAKE_CUDA_WORK_AT_CALL");
    const char* path = getenv("SHIMKIT_CUDART");
    void* runtime = path != NULL ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
    if (runtime != NULL && (at_call == NULL || at_call[0] != '1')) {
      record = (FakeRecordWork)dlsym(runtime, "fake_cuda_record_work");
    }
  }
  return record;
}

static void fake_stream_work(void* stream, void (*fn)(void*), void* work) {
  FakeRecordWork record = fake_record_work();
  if (record != NULL && record(stream, fn, work)) return;
  fn(work);
  free(work);
}

#endif /* FAKE_STREAM_WORK_H_ */
