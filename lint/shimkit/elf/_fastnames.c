/* _shimkit_fastnames: the sorted import and export names of one ELF symbol table, in C.
 *
 * The fast path of shimkit.elf.names (`shimkit symbols`). Compiled on first use by
 * shimkit.elf.fastnames; the pure-Python reader stays the reference and takes over
 * whenever this module declines (returns None).
 *
 * sorted_names(buffer, sym_off, sym_size, str_off, str_size, is64, little)
 *   -> (imports, n_imports, imports_plain, exports, n_exports, exports_plain) | None
 *
 *   Selects, from the symbol table at buffer[sym_off : sym_off + sym_size] (entry 0,
 *   the null symbol, skipped) with names in the string table at
 *   buffer[str_off : str_off + str_size]:
 *     imports: st_shndx == SHN_UNDEF and a non-empty name;
 *     exports: st_shndx != SHN_UNDEF and a binding other than STB_LOCAL.
 *   Each list comes back sorted (byte order, which is code point order for ASCII),
 *   repeats kept, as one bytes object with the names separated by NUL, and its count
 *   (0: no names; 1 with b"": one empty name). `*_plain` is 1 when every name of the
 *   list is printable ASCII other than '"' and '\\' (JSON needs no escapes).
 *   A name runs to its NUL or to the end of the string table.
 *
 *   None (nothing read past any bound) when anything is unusual: a table or string
 *   table outside the buffer, a size that is not a whole number of entries, a name
 *   offset past the string table, a name that is not ASCII. The Python reader then
 *   reads the table and raises its error messages.
 *
 * join_unique(data, sep) -> bytes
 *   data: NUL-separated names, sorted (sorted_names' form, at least one name); the
 *   names without repeats, joined by sep.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A selected name: str + off, n bytes; `key` caches 8 of its bytes (from the sort's
 * current depth on, big-endian, zero-padded past the end: names hold no NUL, so a
 * name that ends sorts before every longer name with its prefix). */
typedef struct {
  uint64_t key;
  uint32_t off;
  uint32_t n;
} name_t;

/* Per byte: 1 = not "plain" for JSON (control, DEL, '"', '\\', non-ASCII); 2 = non-ASCII. */
static unsigned char byte_class[256];

static void init_byte_class(void) {
  for (int c = 0; c < 256; ++c) {
    unsigned char k = 0;
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') k |= 1;
    if (c >= 0x80) k |= 2;
    byte_class[c] = k;
  }
}

/* 0 when every byte of the table is NUL or plain (printable ASCII but '"' and '\\'), else
 * not 0. Written to vectorize: no early exit, no table lookup. */
static unsigned table_bytes_class(const unsigned char* p, size_t n) {
  unsigned char bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = p[i];
    bad |= (unsigned char)((unsigned char)(c - 1) < 0x1f) | (unsigned char)(c >= 0x7f) |
           (unsigned char)(c == '"') | (unsigned char)(c == '\\');
  }
  return bad;
}

static inline uint64_t load_key(const unsigned char* str, const name_t* s, size_t depth) {
  if (depth >= s->n) return 0;
  const size_t avail = s->n - depth;
  const unsigned char* p = str + s->off + depth;
  if (avail >= 8) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t w;
    memcpy(&w, p, 8);
    return __builtin_bswap64(w);
#endif
  }
  uint64_t w = 0;
  for (size_t k = 0; k < 8 && k < avail; ++k) w |= (uint64_t)p[k] << (56 - 8 * k);
  return w;
}

/* Order of two names whose bytes before `depth` are equal and whose keys are loaded at
 * `depth`. */
static inline int cmp_at(const unsigned char* str, const name_t* a, const name_t* b, size_t depth) {
  if (a->key != b->key) return a->key < b->key ? -1 : 1;
  const size_t d = depth + 8;
  if (a->n <= d || b->n <= d || a->off == b->off) return (a->n > b->n) - (a->n < b->n);
  const size_t m = (a->n < b->n ? a->n : b->n) - d;
  const int r = memcmp(str + a->off + d, str + b->off + d, m);
  if (r) return r;
  return (a->n > b->n) - (a->n < b->n);
}

static void insertion_sort(const unsigned char* str, name_t* a, size_t n, size_t depth) {
  for (size_t i = 1; i < n; ++i) {
    name_t v = a[i];
    size_t j = i;
    while (j > 0 && cmp_at(str, &a[j - 1], &v, depth) > 0) {
      a[j] = a[j - 1];
      --j;
    }
    a[j] = v;
  }
}

static inline void swap_names(name_t* a, size_t i, size_t j) {
  name_t t = a[i];
  a[i] = a[j];
  a[j] = t;
}

/* Names equal in their bytes before depth + 8 (one key): 1 when they are all one name
 * (nothing left to order), else their keys reloaded at depth + 8. */
static int descend(const unsigned char* str, name_t* a, size_t n, size_t depth) {
  if ((a[0].key & 0xff) == 0) return 1; /* the pivot ended inside the key: all ended */
  size_t same = 1;
  while (same < n && a[same].off == a[0].off && a[same].n == a[0].n) ++same;
  if (same == n) return 1; /* one string table entry, several symbols */
  for (size_t i = 0; i < n; ++i) a[i].key = load_key(str, &a[i], depth + 8);
  return 0;
}

static void mkqs(const unsigned char* str, name_t* a, size_t n, size_t depth);

static void sort_part(const unsigned char* str, name_t* a, size_t n, size_t depth, int eq) {
  if (n < 2) return;
  if (eq) {
    if (descend(str, a, n, depth)) return;
    depth += 8;
  }
  mkqs(str, a, n, depth);
}

/* Multikey quicksort (Bentley & Sedgewick) on 8-byte keys: three-way partition on the
 * key at `depth`. The largest part is handled by the loop, the two others by
 * recursion: a part that is not the largest holds at most half the names, so the
 * recursion is at most log2(n) deep whatever the names are. */
static void mkqs(const unsigned char* str, name_t* a, size_t n, size_t depth) {
  while (n > 1) {
    if (n < 16) {
      insertion_sort(str, a, n, depth);
      return;
    }
    {
      const uint64_t x = a[0].key, y = a[n / 2].key, z = a[n - 1].key;
      const size_t m = (x < y) ? ((y < z) ? n / 2 : (x < z ? n - 1 : 0))
                               : ((x < z) ? 0 : (y < z ? n - 1 : n / 2));
      swap_names(a, 0, m);
    }
    const uint64_t pivot = a[0].key;
    /* [0, lt): < pivot; [lt, i): == pivot; (gt, n): > pivot; gt >= i - 1 >= 0 */
    size_t lt = 0, i = 1, gt = n - 1;
    while (i <= gt) {
      const uint64_t k = a[i].key;
      if (k < pivot) {
        swap_names(a, lt++, i++);
      } else if (k > pivot) {
        swap_names(a, i, gt--);
      } else {
        ++i;
      }
    }
    const size_t n_lt = lt, n_eq = gt + 1 - lt, n_gt = n - (gt + 1);
    name_t* const p_lt = a;
    name_t* const p_eq = a + lt;
    name_t* const p_gt = a + gt + 1;
    if (n_lt >= n_eq && n_lt >= n_gt) {
      sort_part(str, p_eq, n_eq, depth, 1);
      sort_part(str, p_gt, n_gt, depth, 0);
      a = p_lt;
      n = n_lt;
    } else if (n_gt >= n_eq) {
      sort_part(str, p_lt, n_lt, depth, 0);
      sort_part(str, p_eq, n_eq, depth, 1);
      a = p_gt;
      n = n_gt;
    } else {
      sort_part(str, p_lt, n_lt, depth, 0);
      sort_part(str, p_gt, n_gt, depth, 0);
      if (n_eq < 2 || descend(str, p_eq, n_eq, depth)) return;
      a = p_eq;
      n = n_eq;
      depth += 8;
    }
  }
}

static void sort_names(const unsigned char* str, name_t* a, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i].key = load_key(str, &a[i], 0);
  mkqs(str, a, n, 0);
}

/* The names joined by NUL: their lengths plus the separators. */
static size_t packed_size(const name_t* names, size_t count) {
  size_t total = count ? count - 1 : 0;
  for (size_t i = 0; i < count; ++i) total += names[i].n;
  return total;
}

static PyObject* packed(const unsigned char* str, const name_t* names, size_t count) {
  const size_t total = packed_size(names, count);
  if (total > (size_t)PY_SSIZE_T_MAX) return PyErr_NoMemory();
  PyObject* out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
  if (out == NULL) return NULL;
  char* w = PyBytes_AS_STRING(out);
  for (size_t i = 0; i < count; ++i) {
    if (i) *w++ = '\0';
    memcpy(w, str + names[i].off, names[i].n);
    w += names[i].n;
  }
  return out;
}

static PyObject* sorted_names(PyObject* self, PyObject* args) {
  (void)self;
  Py_buffer view;
  unsigned long long sym_off, sym_size, str_off, str_size;
  int is64, little;
  if (!PyArg_ParseTuple(args, "y*KKKKpp", &view, &sym_off, &sym_size, &str_off, &str_size, &is64,
                        &little)) {
    return NULL;
  }
  const unsigned long long len = (unsigned long long)view.len;
  const unsigned long long ent = is64 ? 24 : 16;
  const size_t name_at = 0, info_at = is64 ? 4 : 12, shndx_at = is64 ? 6 : 14;
  if (sym_off > len || sym_size > len - sym_off || str_off > len || str_size > len - str_off ||
      sym_size % ent != 0 || str_size > UINT32_MAX) {
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
  }
  const size_t count = (size_t)(sym_size / ent);
  const unsigned char* base = (const unsigned char*)view.buf;
  const unsigned char* sym = base + sym_off;
  const unsigned char* str = base + str_off;
  const size_t strsz = (size_t)str_size;
  /* One array for both lists: imports fill it from the front, exports from the back
   * (a symbol is in one list at most). */
  name_t* all = NULL;
  name_t* imports = NULL;
  name_t* exports = NULL;
  size_t n_imp = 0, n_exp = 0;
  unsigned imp_class = 0, exp_class = 0;
  int ok = 1;
  if (count > 1) {
    all = (name_t*)malloc(count * sizeof(name_t));
    if (all == NULL) {
      PyBuffer_Release(&view);
      return PyErr_NoMemory();
    }
  }
  Py_BEGIN_ALLOW_THREADS;
  /* One pass over the whole string table (vectorizable): when no byte of it is
   * non-ASCII or needs a JSON escape, no name does, and a name's length is a memchr. */
  const unsigned table_class = table_bytes_class(str, strsz);
  const unsigned char* const end = str + strsz;
  for (size_t i = 1; i < count && ok; ++i) {
    const unsigned char* e = sym + i * (size_t)ent;
    uint32_t st_name = little ? ((uint32_t)e[name_at] | (uint32_t)e[name_at + 1] << 8 |
                                 (uint32_t)e[name_at + 2] << 16 | (uint32_t)e[name_at + 3] << 24)
                              : ((uint32_t)e[name_at + 3] | (uint32_t)e[name_at + 2] << 8 |
                                 (uint32_t)e[name_at + 1] << 16 | (uint32_t)e[name_at] << 24);
    if ((size_t)st_name >= (strsz ? strsz : 1)) { /* the Python reader says which symbol */
      ok = 0;
      break;
    }
    const int defined = (e[shndx_at] | e[shndx_at + 1]) != 0;
    const int global = (e[info_at] >> 4) != 0;
    if (defined && !global) continue;
    const unsigned char* s = str + (strsz ? st_name : 0);
    size_t n;
    unsigned k = 0;
    if (table_class == 0) {
      const unsigned char* z = memchr(s, 0, (size_t)(end - s));
      n = (size_t)((z ? z : end) - s);
    } else {
      const unsigned char* q = s;
      while (q < end && *q) k |= byte_class[*q++];
      n = (size_t)(q - s);
      if (k & 2) { /* not ASCII: surrogateescape decoding and its order are Python's job */
        ok = 0;
        break;
      }
    }
    if (!defined) {
      if (n == 0) continue;
      all[n_imp].off = (uint32_t)(s - str);
      all[n_imp].n = (uint32_t)n;
      ++n_imp;
      imp_class |= k;
    } else {
      ++n_exp;
      all[count - n_exp].off = (uint32_t)(s - str);
      all[count - n_exp].n = (uint32_t)n;
      exp_class |= k;
    }
  }
  imports = all;
  exports = all ? all + (count - n_exp) : NULL;
  if (ok) {
    /* Many symbols naming long overlapping strings would make the packed lists far
     * larger than the table (a hostile file): the Python reader keeps one str per
     * offset instead. */
    ok = packed_size(imports, n_imp) <= 2 * (strsz + count) &&
         packed_size(exports, n_exp) <= 2 * (strsz + count);
  }
  if (ok) {
    sort_names(str, imports, n_imp);
    sort_names(str, exports, n_exp);
  }
  Py_END_ALLOW_THREADS;
  PyObject* result = NULL;
  if (ok) {
    PyObject* imp = packed(str, imports, n_imp);
    PyObject* exp = imp ? packed(str, exports, n_exp) : NULL;
    if (exp != NULL) {
      result = Py_BuildValue("(NnNNnN)", imp, (Py_ssize_t)n_imp, PyBool_FromLong(!(imp_class & 1)),
                             exp, (Py_ssize_t)n_exp, PyBool_FromLong(!(exp_class & 1)));
    } else {
      Py_XDECREF(imp);
    }
  } else {
    result = Py_NewRef(Py_None);
  }
  free(all);
  PyBuffer_Release(&view);
  return result;
}

static PyObject* join_unique(PyObject* self, PyObject* args) {
  (void)self;
  Py_buffer data, sep;
  if (!PyArg_ParseTuple(args, "y*y*", &data, &sep)) return NULL;
  const char* s = (const char*)data.buf;
  const char* end = s + data.len;
  /* at most every name kept: each NUL becomes sep */
  size_t nuls = 0;
  for (const char* q = s; (q = memchr(q, '\0', (size_t)(end - q))) != NULL; ++q) ++nuls;
  PyObject* out = NULL;
  if (sep.len > 1 && nuls > ((size_t)PY_SSIZE_T_MAX - (size_t)data.len) / (size_t)(sep.len - 1)) {
    PyErr_NoMemory();
    goto done;
  }
  out = PyBytes_FromStringAndSize(NULL, data.len + (Py_ssize_t)nuls * (sep.len - 1));
  if (out == NULL) goto done;
  {
    char* const start = PyBytes_AS_STRING(out);
    char* w = start;
    const char* prev = NULL;
    size_t prev_n = 0;
    for (;;) {
      const char* z = memchr(s, '\0', (size_t)(end - s));
      const char* e = z ? z : end;
      const size_t n = (size_t)(e - s);
      if (prev == NULL || n != prev_n || memcmp(prev, s, n) != 0) {
        if (prev != NULL) {
          memcpy(w, sep.buf, (size_t)sep.len);
          w += sep.len;
        }
        memcpy(w, s, n);
        w += n;
        prev = s;
        prev_n = n;
      }
      if (z == NULL) break;
      s = z + 1;
    }
    if (_PyBytes_Resize(&out, (Py_ssize_t)(w - start)) != 0) out = NULL;
  }
done:
  PyBuffer_Release(&data);
  PyBuffer_Release(&sep);
  return out;
}

static PyMethodDef methods[] = {
    {"sorted_names", sorted_names, METH_VARARGS,
     "sorted_names(buffer, sym_off, sym_size, str_off, str_size, is64, little)"},
    {"join_unique", join_unique, METH_VARARGS, "join_unique(data, sep) -> bytes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "_shimkit_fastnames",
    "Sorted ELF symbol names, in C.",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__shimkit_fastnames(void) {
  init_byte_class();
  return PyModule_Create(&module_def);
}
