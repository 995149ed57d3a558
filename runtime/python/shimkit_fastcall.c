/* _shimkit_fastcall: the hot call of shimkit.runtime.Model, in C.
 *
 * A Runner shares the ctypes descriptor arrays of one Model (inputs, outputs)
 * and calls shimkit_model_run through a function pointer (so this module does
 * not link the runtime: any variant, any $SHIMKIT_LIB_DIR), then copies each
 * output from model-owned memory into a numpy array with one memcpy.
 *
 * Runner.run(inputs) handles only the common case and returns:
 *   a list of numpy arrays   every output copied into an array only the caller
 *                            holds (new, or last call's if nobody else refers to it);
 *   (list,)                  ran, but the outputs whose slot is None came out in
 *                            another geometry and stayed in model-owned memory:
 *                            the Runner's lock is STILL HELD; the caller copies
 *                            them from the shared descriptors, then __exit__s;
 *   an int                   ran and failed with that shimkit_status;
 *   None                     declined (anything unusual, geometry not yet validated
 *                            by the Python path, or detached): nothing ran.
 * Inputs qualify when each is a numpy ndarray, C-contiguous, aligned, native
 * byte order, with the exact numpy type, ndim and sizes the Python path
 * validated last for that input (describe_input; the sizes are the shared
 * descriptor's). Outputs qualify once their geometry is known (describe_output).
 *
 * The Runner is also the Model's lock: run() takes it, and `with runner:`
 * takes it for the Python path; waiting and running both release the GIL. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <pthread.h>

#include "runtime/shimkit_runtime.h"

typedef int (*run_fn)(shimkit_model*, const shimkit_tensor*, size_t, shimkit_tensor*, size_t);

typedef struct {
  PyObject_HEAD run_fn run;
  shimkit_model* model;
  shimkit_tensor* inputs;
  shimkit_tensor* outputs;
  Py_ssize_t num_inputs;
  Py_ssize_t num_outputs;
  PyObject* owner;    /* keeps the descriptor memory alive */
  int* in_type;       /* numpy type number per input; -1: not validated */
  int* out_type;      /* numpy type number per output; -1: geometry unknown */
  npy_intp* out_dims; /* num_outputs x SHIMKIT_MAX_DIMS sizes */
  int* out_nd;        /* ndim per output */
  int* out_code;      /* shimkit dtype code per output */
  PyObject** cache;   /* per output: the array returned last time (or NULL) */
  pthread_mutex_t lock;
  int lock_made;
  unsigned long long fast_calls;
  unsigned long long reused;
} Runner;

static void Runner_dealloc(Runner* self) {
  if (self->cache != NULL) {
    for (Py_ssize_t i = 0; i < self->num_outputs; ++i) Py_XDECREF(self->cache[i]);
    PyMem_Free(self->cache);
  }
  if (self->lock_made) pthread_mutex_destroy(&self->lock);
  Py_XDECREF(self->owner);
  PyMem_Free(self->in_type);
  PyMem_Free(self->out_type);
  PyMem_Free(self->out_dims);
  PyMem_Free(self->out_nd);
  PyMem_Free(self->out_code);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

static int Runner_init(Runner* self, PyObject* args, PyObject* kwds) {
  unsigned long long fn = 0, model = 0, in_addr = 0, out_addr = 0;
  Py_ssize_t n_in = 0, n_out = 0;
  PyObject* owner = NULL;
  static char* kwlist[] = {"run",     "model",       "inputs", "num_inputs",
                           "outputs", "num_outputs", "owner",  NULL};
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "KKKnKnO", kwlist, &fn, &model, &in_addr, &n_in,
                                   &out_addr, &n_out, &owner)) {
    return -1;
  }
  if (fn == 0 || model == 0 || n_in < 0 || n_out < 0 || (n_in > 0 && in_addr == 0) ||
      out_addr == 0) {
    PyErr_SetString(PyExc_ValueError, "Runner: null pointer or negative count");
    return -1;
  }
  if (self->in_type != NULL) {
    PyErr_SetString(PyExc_RuntimeError, "Runner: already initialised");
    return -1;
  }
  self->run = (run_fn)(uintptr_t)fn;
  self->model = (shimkit_model*)(uintptr_t)model;
  self->inputs = (shimkit_tensor*)(uintptr_t)in_addr;
  self->outputs = (shimkit_tensor*)(uintptr_t)out_addr;
  self->num_inputs = n_in;
  self->num_outputs = n_out;
  self->in_type = PyMem_Malloc(sizeof(int) * (size_t)(n_in + 1));
  self->out_type = PyMem_Malloc(sizeof(int) * (size_t)(n_out + 1));
  self->out_nd = PyMem_Malloc(sizeof(int) * (size_t)(n_out + 1));
  self->out_code = PyMem_Malloc(sizeof(int) * (size_t)(n_out + 1));
  self->out_dims = PyMem_Malloc(sizeof(npy_intp) * SHIMKIT_MAX_DIMS * (size_t)(n_out + 1));
  self->cache = PyMem_Calloc((size_t)(n_out + 1), sizeof(PyObject*));
  self->lock_made = pthread_mutex_init(&self->lock, NULL) == 0;
  if (!self->in_type || !self->out_type || !self->out_nd || !self->out_code || !self->out_dims ||
      !self->cache || !self->lock_made) {
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < n_in; ++i) self->in_type[i] = -1;
  for (Py_ssize_t i = 0; i < n_out; ++i) self->out_type[i] = -1;
  Py_INCREF(owner);
  self->owner = owner;
  return 0;
}

static int check_index(Py_ssize_t index, Py_ssize_t count) {
  if (index < 0 || index >= count) {
    PyErr_SetString(PyExc_IndexError, "Runner: index out of range");
    return -1;
  }
  return 0;
}

/* describe_input(i, type_num): the Python path validated input i and wrote its
 * descriptor (sizes, contiguous strides, dtype code); arrays of numpy type
 * `type_num` with those sizes may take the fast path. type_num -1 forgets. */
static PyObject* Runner_describe_input(Runner* self, PyObject* args) {
  Py_ssize_t index;
  int type_num;
  if (!PyArg_ParseTuple(args, "ni", &index, &type_num)) return NULL;
  if (check_index(index, self->num_inputs) < 0) return NULL;
  self->in_type[index] = type_num;
  Py_RETURN_NONE;
}

/* describe_output(i, type_num, code, shape): output i comes out with this
 * geometry (numpy type number, shimkit dtype code, sizes). */
static PyObject* Runner_describe_output(Runner* self, PyObject* args) {
  Py_ssize_t index;
  int type_num, code;
  PyObject* shape;
  if (!PyArg_ParseTuple(args, "niiO!", &index, &type_num, &code, &PyTuple_Type, &shape)) {
    return NULL;
  }
  if (check_index(index, self->num_outputs) < 0) return NULL;
  const Py_ssize_t nd = PyTuple_GET_SIZE(shape);
  if (nd > SHIMKIT_MAX_DIMS) {
    PyErr_SetString(PyExc_ValueError, "Runner: too many dimensions");
    return NULL;
  }
  npy_intp* dims = self->out_dims + index * SHIMKIT_MAX_DIMS;
  for (Py_ssize_t d = 0; d < nd; ++d) {
    const Py_ssize_t v = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d));
    if (v == -1 && PyErr_Occurred()) return NULL;
    if (v < 0) {
      PyErr_SetString(PyExc_ValueError, "Runner: negative size");
      return NULL;
    }
    dims[d] = v;
  }
  self->out_nd[index] = (int)nd;
  self->out_code[index] = code;
  self->out_type[index] = type_num;
  Py_RETURN_NONE;
}

/* forget_outputs(): output geometry unknown again (after a failed run). */
static PyObject* Runner_forget_outputs(Runner* self, PyObject* unused) {
  (void)unused;
  for (Py_ssize_t i = 0; i < self->num_outputs; ++i) self->out_type[i] = -1;
  Py_RETURN_NONE;
}

static int input_ok(const Runner* self, Py_ssize_t i, PyObject* obj) {
  if (!PyArray_Check(obj)) return 0;
  PyArrayObject* arr = (PyArrayObject*)obj;
  const shimkit_tensor* desc = &self->inputs[i];
  if (self->in_type[i] < 0 || PyArray_TYPE(arr) != self->in_type[i]) return 0;
  if (!PyArray_IS_C_CONTIGUOUS(arr) || !PyArray_ISALIGNED(arr) || !PyArray_ISNOTSWAPPED(arr)) {
    return 0;
  }
  const int nd = PyArray_NDIM(arr);
  if (nd != desc->ndim) return 0;
  const npy_intp* dims = PyArray_DIMS(arr);
  for (int d = 0; d < nd; ++d) {
    if (dims[d] != desc->sizes[d]) return 0;
  }
  return 1;
}

/* Takes the Runner's lock; waits with the GIL released if another thread holds it.
 * A pthread mutex, not a PyThread lock: CPython 3.11's acquire reads the monotonic
 * clock on every call, even one that does not wait (2% of a small MLP's call, perf).
 * Whoever locks it unlocks it, on the same thread: run(), or __enter__ and __exit__. */
static void lock_runner(Runner* self) {
  if (pthread_mutex_trylock(&self->lock) != 0) {
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&self->lock);
    Py_END_ALLOW_THREADS
  }
}

/* A previous output nobody else can see any more (only our cache refers to
 * it, no weak references), still of the geometry output i comes out with. */
static int reusable(const Runner* self, Py_ssize_t i, PyObject* obj) {
  if (obj == NULL || Py_REFCNT(obj) != 1) return 0;
  const Py_ssize_t weak = Py_TYPE(obj)->tp_weaklistoffset;
  if (weak > 0 && *(PyObject**)((char*)obj + weak) != NULL) return 0;
  PyArrayObject* arr = (PyArrayObject*)obj;
  const int want =
      NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_OWNDATA | NPY_ARRAY_WRITEABLE | NPY_ARRAY_ALIGNED;
  if ((PyArray_FLAGS(arr) & want) != want || PyArray_BASE(arr) != NULL) return 0;
  if (PyArray_TYPE(arr) != self->out_type[i] || PyArray_NDIM(arr) != self->out_nd[i]) return 0;
  const npy_intp* dims = self->out_dims + i * SHIMKIT_MAX_DIMS;
  for (int d = 0; d < self->out_nd[i]; ++d) {
    if (PyArray_DIMS(arr)[d] != dims[d]) return 0;
  }
  return 1;
}

/* A fresh output array for output i, or the last one if nobody holds it. */
static PyObject* output_array(Runner* self, Py_ssize_t i) {
  PyObject* cached = self->cache[i];
  if (reusable(self, i, cached)) {
    ++self->reused;
    Py_INCREF(cached);
    return cached;
  }
  PyObject* out =
      PyArray_SimpleNew(self->out_nd[i], self->out_dims + i * SHIMKIT_MAX_DIMS, self->out_type[i]);
  if (out == NULL) return NULL;
  Py_INCREF(out);
  self->cache[i] = out;
  Py_XDECREF(cached);
  return out;
}

static int qualifies(const Runner* self, PyObject* const* inputs, Py_ssize_t n) {
  if (self->model == NULL || n != self->num_inputs) return 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!input_ok(self, i, inputs[i])) return 0;
  }
  for (Py_ssize_t i = 0; i < self->num_outputs; ++i) {
    if (self->out_type[i] < 0) return 0;
  }
  return 1;
}

/* Whether model output `d` has output i's expected dtype, ndim and sizes. */
static int same_geometry(const Runner* self, Py_ssize_t i, const shimkit_tensor* d) {
  const int nd = self->out_nd[i];
  if (d->ndim != nd || d->dtype != self->out_code[i] || d->data == NULL) return 0;
  const npy_intp* dims = self->out_dims + i * SHIMKIT_MAX_DIMS;
  for (int k = 0; k < nd; ++k) {
    if (d->sizes[k] != dims[k]) return 0;
  }
  return 1;
}

/* Copies model output `d` (any strides, in elements) into the C-contiguous `dst`. */
static void copy_output(const shimkit_tensor* d, char* dst, size_t itemsize, size_t nbytes) {
  const int nd = d->ndim;
  int64_t stride = 1;
  int contiguous = 1;
  for (int k = nd - 1; k >= 0; --k) {
    if (d->sizes[k] != 1 && d->strides[k] != stride) contiguous = 0;
    stride *= d->sizes[k];
  }
  if (nbytes == 0) return;
  if (contiguous) {
    memcpy(dst, d->data, nbytes);
    return;
  }
  int64_t index[SHIMKIT_MAX_DIMS] = {0};
  const char* src = (const char*)d->data;
  const size_t count = nbytes / itemsize;
  for (size_t n = 0; n < count; ++n) {
    int64_t offset = 0;
    for (int k = 0; k < nd; ++k) offset += index[k] * d->strides[k];
    memcpy(dst + n * itemsize, src + offset * (int64_t)itemsize, itemsize);
    for (int k = nd - 1; k >= 0; --k) {
      if (++index[k] < d->sizes[k]) break;
      index[k] = 0;
    }
  }
}

/* `inputs` (n of them) are borrowed: the caller keeps them alive for the call. */
static PyObject* run_locked(Runner* self, PyObject* const* inputs, Py_ssize_t n, int* keep_lock) {
  *keep_lock = 0;
  if (!qualifies(self, inputs, n)) Py_RETURN_NONE;
  for (Py_ssize_t i = 0; i < n; ++i) {
    self->inputs[i].data = PyArray_DATA((PyArrayObject*)inputs[i]);
  }
  PyObject* results = PyList_New(self->num_outputs);
  if (results == NULL) return NULL;
  for (Py_ssize_t i = 0; i < self->num_outputs; ++i) {
    PyObject* out = output_array(self, i);
    if (out == NULL) {
      Py_DECREF(results);
      return NULL;
    }
    PyList_SET_ITEM(results, i, out);
  }
  int rc;
  /* The input arrays are kept alive by our caller for the whole call; the
   * output arrays by `results`. */
  Py_BEGIN_ALLOW_THREADS rc = self->run(self->model, self->inputs, (size_t)self->num_inputs,
                                        self->outputs, (size_t)self->num_outputs);
  Py_END_ALLOW_THREADS++ self->fast_calls;
  if (rc != 0) {
    Py_DECREF(results);
    return PyLong_FromLong(rc);
  }
  /* The outputs live in model-owned memory until the next run (we hold the
   * lock): copy each into its array if it has exactly the expected dtype and
   * sizes (any strides), else leave it to the caller. */
  int partial = 0;
  for (Py_ssize_t i = 0; i < self->num_outputs; ++i) {
    PyArrayObject* out = (PyArrayObject*)PyList_GET_ITEM(results, i);
    if (same_geometry(self, i, &self->outputs[i])) {
      copy_output(&self->outputs[i], PyArray_DATA(out), (size_t)PyArray_ITEMSIZE(out),
                  (size_t)PyArray_NBYTES(out));
      continue;
    }
    Py_INCREF(Py_None);
    PyList_SetItem(results, i, Py_None); /* drops the unused array */
    partial = 1;
  }
  if (!partial) return results;
  PyObject* wrapped = PyTuple_Pack(1, results);
  Py_DECREF(results);
  *keep_lock = wrapped != NULL; /* the caller reads model-owned outputs, then releases */
  return wrapped;
}

static PyObject* run_args(Runner* self, PyObject* const* inputs, Py_ssize_t n) {
  lock_runner(self);
  int keep_lock = 0;
  PyObject* result = run_locked(self, inputs, n, &keep_lock);
  if (!keep_lock) pthread_mutex_unlock(&self->lock);
  return result;
}

static PyObject* Runner_run(Runner* self, PyObject* inputs) {
  if (!PyTuple_Check(inputs)) Py_RETURN_NONE;
  return run_args(self, &PyTuple_GET_ITEM(inputs, 0), PyTuple_GET_SIZE(inputs));
}

static PyObject* Runner_enter(Runner* self, PyObject* unused) {
  (void)unused;
  lock_runner(self);
  Py_INCREF(self);
  return (PyObject*)self;
}

static PyObject* Runner_exit(Runner* self, PyObject* args) {
  (void)args;
  pthread_mutex_unlock(&self->lock);
  Py_RETURN_FALSE;
}

/* detach(): the model is gone; run() declines from now on. Call with the lock held. */
static PyObject* Runner_detach(Runner* self, PyObject* unused) {
  (void)unused;
  self->model = NULL;
  Py_RETURN_NONE;
}

static PyObject* Runner_get_fast_calls(Runner* self, void* closure) {
  (void)closure;
  return PyLong_FromUnsignedLongLong(self->fast_calls);
}

static PyObject* Runner_get_reused(Runner* self, void* closure) {
  (void)closure;
  return PyLong_FromUnsignedLongLong(self->reused);
}

static PyMethodDef Runner_methods[] = {
    {"run", (PyCFunction)Runner_run, METH_O, "Run on a tuple of inputs (see module doc)."},
    {"describe_input", (PyCFunction)Runner_describe_input, METH_VARARGS,
     "describe_input(i, type_num): input i's descriptor holds validated geometry."},
    {"describe_output", (PyCFunction)Runner_describe_output, METH_VARARGS,
     "describe_output(i, type_num, code, shape): output i's geometry."},
    {"forget_outputs", (PyCFunction)Runner_forget_outputs, METH_NOARGS,
     "Output geometry unknown again: decline until describe_output."},
    {"detach", (PyCFunction)Runner_detach, METH_NOARGS, "The model is freed: decline every run."},
    {"__enter__", (PyCFunction)Runner_enter, METH_NOARGS, "Take the Runner's lock."},
    {"__exit__", (PyCFunction)Runner_exit, METH_VARARGS, "Release the Runner's lock."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Runner_getset[] = {
    {"fast_calls", (getter)Runner_get_fast_calls, NULL, "runs done by the fast path", NULL},
    {"reused", (getter)Runner_get_reused, NULL, "outputs written into an unreferenced old array",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject RunnerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_shimkit_fastcall.Runner",
    .tp_basicsize = sizeof(Runner),
    .tp_dealloc = (destructor)Runner_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The fast call path of one shimkit.runtime.Model.",
    .tp_methods = Runner_methods,
    .tp_getset = Runner_getset,
    .tp_init = (initproc)Runner_init,
    .tp_new = PyType_GenericNew,
};

/* copy_output(src, dst): the output copy on a numpy array `src` (any strides
 * that are whole elements) into the C-contiguous array `dst`; for tests. */
static PyObject* module_copy_output(PyObject* module, PyObject* args) {
  (void)module;
  PyArrayObject *src, *dst;
  if (!PyArg_ParseTuple(args, "O!O!", &PyArray_Type, &src, &PyArray_Type, &dst)) return NULL;
  const npy_intp itemsize = PyArray_ITEMSIZE(src);
  const int nd = PyArray_NDIM(src);
  if (nd > SHIMKIT_MAX_DIMS || PyArray_ITEMSIZE(dst) != itemsize ||
      PyArray_SIZE(dst) != PyArray_SIZE(src) || !PyArray_IS_C_CONTIGUOUS(dst) ||
      !PyArray_ISWRITEABLE(dst)) {
    PyErr_SetString(PyExc_ValueError, "copy_output: incompatible arrays");
    return NULL;
  }
  shimkit_tensor d = {0};
  d.data = PyArray_DATA(src);
  d.ndim = nd;
  for (int k = 0; k < nd; ++k) {
    if (PyArray_STRIDES(src)[k] % itemsize != 0) {
      PyErr_SetString(PyExc_ValueError, "copy_output: stride is not whole elements");
      return NULL;
    }
    d.sizes[k] = PyArray_DIMS(src)[k];
    d.strides[k] = PyArray_STRIDES(src)[k] / itemsize;
  }
  copy_output(&d, PyArray_DATA(dst), (size_t)itemsize, (size_t)PyArray_NBYTES(dst));
  Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"copy_output", module_copy_output, METH_VARARGS,
     "copy_output(src, dst): the fast call's output copy (for tests)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef fastcall_module = {PyModuleDef_HEAD_INIT, .m_name = "_shimkit_fastcall",
                                             .m_doc = "Fast call path of shimkit.runtime.Model.",
                                             .m_size = -1, .m_methods = module_methods};

PyMODINIT_FUNC PyInit__shimkit_fastcall(void) {
  import_array();
  if (PyType_Ready(&RunnerType) < 0) return NULL;
  PyObject* module = PyModule_Create(&fastcall_module);
  if (module == NULL) return NULL;
  Py_INCREF(&RunnerType);
  if (PyModule_AddObject(module, "Runner", (PyObject*)&RunnerType) < 0) {
    Py_DECREF(&RunnerType);
    Py_DECREF(module);
    return NULL;
  }
  return module;
}
