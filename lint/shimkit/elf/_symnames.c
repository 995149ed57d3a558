/* shimkit.elf._symnames: the sorted import and export names of one ELF symbol table.
 *
 * The compiled half of shimkit.elf.symtab.sorted_names, the names-only view behind
 * `shimkit symbols` (several times faster than Python on libtorch's 75k symbols, most of
 * it the sort). Built with the package (docs/development.md); the Python code in symtab.py
 * is the reference and takes over whenever this is not built or returns None.
 *
 * sorted_names(buffer, sym_off, sym_size, str_off, str_size, is64, little)
 *     -> (imports: list[str], exports: list[str]) | None
 *
 *   From the symbol table at buffer[sym_off : sym_off + sym_size] (entry 0, the null
 *   symbol, skipped), with names in the string table at buffer[str_off : str_off +
 *   str_size]:
 *     imports: st_shndx == SHN_UNDEF and a non-empty name;
 *     exports: st_shndx != SHN_UNDEF and a binding other than STB_LOCAL.
 *   Each list is sorted by bytes (code point order: the names are ASCII), without
 *   repeats. A name runs to its NUL or to the end of the string table.
 *
 *   None, with nothing read outside the buffer, when anything is unusual: a range
 *   outside the buffer, a size that is not a whole number of entries, a name offset past
 *   the string table, a name that is not ASCII, names that overlap far more than a
 *   linker makes them. The Python reader then reads the table and reports what is wrong.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A selected name: n bytes at s. `key` caches 8 of its bytes from the sort's current
 * depth on, big-endian, zero-padded past the end (names hold no NUL, so a name sorts
 * before every longer name it starts). */
typedef struct {
  uint64_t key;
  const unsigned char* s;
  size_t n;
} name_t;

static uint64_t key_at(const name_t* x, size_t depth) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (x->n >= depth + 8) {
    uint64_t word;
    memcpy(&word, x->s + depth, 8);
    return __builtin_bswap64(word);
  }
#endif
  uint64_t key = 0;
  for (size_t k = depth; k < depth + 8; ++k) key = (key << 8) | (k < x->n ? x->s[k] : 0);
  return key;
}

/* Order of two names whose first `depth` bytes are equal. */
static int compare_from(const name_t* a, const name_t* b, size_t depth) {
  const size_t m = a->n < b->n ? a->n : b->n;
  if (m > depth) {
    const int r = memcmp(a->s + depth, b->s + depth, m - depth);
    if (r != 0) return r;
  }
  return (a->n > b->n) - (a->n < b->n);
}

static void swap_names(name_t* a, size_t i, size_t j) {
  const name_t t = a[i];
  a[i] = a[j];
  a[j] = t;
}

/* Multikey quicksort (Bentley & Sedgewick), 8 bytes at a time: a three-way partition on
 * the keys at `depth`; the equal part goes on at depth + 8. Names share long prefixes
 * (mangled C++), which a comparison sort would compare over and over. The largest part
 * is handled by the loop, the others by recursion (each at most half the names), so the
 * recursion is at most log2(n) deep. Every name's key is loaded at `depth`. */
static void multikey_sort(name_t* a, size_t n, size_t depth) {
  while (n > 1) {
    if (n < 12) { /* insertion sort */
      for (size_t i = 1; i < n; ++i) {
        for (size_t j = i; j > 0 && compare_from(&a[j - 1], &a[j], depth) > 0; --j) {
          swap_names(a, j - 1, j);
        }
      }
      return;
    }
    const uint64_t x = a[0].key, y = a[n / 2].key, z = a[n - 1].key;
    swap_names(a, 0, (x < y) == (y < z) ? n / 2 : ((x < y) == (x < z) ? n - 1 : 0));
    const uint64_t pivot = a[0].key;
    size_t lt = 0, i = 1, gt = n - 1; /* [0, lt) <, [lt, i) ==, (gt, n) > the pivot */
    while (i <= gt) {
      if (a[i].key < pivot) {
        swap_names(a, lt++, i++);
      } else if (a[i].key > pivot) {
        swap_names(a, i, gt--);
      } else {
        ++i;
      }
    }
    name_t* parts[3] = {a, a + lt, a + gt + 1};
    size_t sizes[3] = {lt, gt + 1 - lt, n - (gt + 1)};
    /* The equal part goes one key deeper unless its names ended inside this key. */
    const int equal_done = (pivot & 0xff) == 0;
    if (!equal_done) {
      for (size_t k = 0; k < sizes[1]; ++k) parts[1][k].key = key_at(&parts[1][k], depth + 8);
    }
    size_t largest =
        sizes[0] >= sizes[1] && sizes[0] >= sizes[2] ? 0 : (sizes[1] >= sizes[2] ? 1 : 2);
    for (size_t p = 0; p < 3; ++p) {
      if (p == largest) continue;
      if (p == 1) {
        if (!equal_done) multikey_sort(parts[1], sizes[1], depth + 8);
      } else {
        multikey_sort(parts[p], sizes[p], depth);
      }
    }
    if (largest == 1) {
      if (equal_done) return;
      depth += 8;
    }
    a = parts[largest];
    n = sizes[largest];
  }
}

static uint32_t read_u32(const unsigned char* p, int little) {
  return little
             ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
             : (uint32_t)p[3] | (uint32_t)p[2] << 8 | (uint32_t)p[1] << 16 | (uint32_t)p[0] << 24;
}

/* The sorted names without repeats, as a list of str (ASCII, checked by the caller). */
static PyObject* as_list(const name_t* names, size_t count) {
  PyObject* list = PyList_New((Py_ssize_t)count);
  if (list == NULL) return NULL;
  size_t kept = 0;
  for (size_t i = 0; i < count; ++i) {
    if (i > 0 && names[i].n == names[i - 1].n &&
        memcmp(names[i].s, names[i - 1].s, names[i].n) == 0) {
      continue; /* one name, several table entries (versions) */
    }
    PyObject* text = PyUnicode_New((Py_ssize_t)names[i].n, 127);
    if (text == NULL) {
      Py_DECREF(list);
      return NULL;
    }
    memcpy(PyUnicode_1BYTE_DATA(text), names[i].s, names[i].n);
    PyList_SET_ITEM(list, (Py_ssize_t)kept++, text);
  }
  if (kept < count && PyList_SetSlice(list, (Py_ssize_t)kept, (Py_ssize_t)count, NULL) != 0) {
    Py_DECREF(list);
    return NULL;
  }
  return list;
}

/* 1 when no byte of the table is outside ASCII (written to vectorize). */
static int all_ascii(const unsigned char* p, size_t n) {
  unsigned char high = 0;
  for (size_t i = 0; i < n; ++i) high |= p[i];
  return high < 0x80;
}

/* Selects and sorts; 0 when the table is one to leave to Python. Imports fill `all` from
 * the front, exports from the back: all[count - n_exp, count) (entries 1..count-1 give
 * at most count - 1 names in all). */
static int select_and_sort(const unsigned char* sym, size_t count, int is64, int little,
                           const unsigned char* str, size_t strsz, name_t* all, size_t* n_imp,
                           size_t* n_exp) {
  const size_t entry = is64 ? 24 : 16, info_at = is64 ? 4 : 12, shndx_at = is64 ? 6 : 14;
  const unsigned char* const end = str + strsz;
  const int ascii = all_ascii(str, strsz);
  /* Names may overlap (the linker shares tails); far more name bytes than the table holds
   * is a hostile file, which the Python reader reports. */
  const size_t budget = 8 * strsz + ((size_t)1 << 20);
  size_t spent = 0;
  for (size_t i = 1; i < count; ++i) {
    const unsigned char* e = sym + i * entry;
    const uint32_t st_name = read_u32(e, little);
    if ((size_t)st_name >= strsz) return 0;
    const int defined = (e[shndx_at] | e[shndx_at + 1]) != 0;
    const int local = (e[info_at] >> 4) == 0;
    if (defined && local) continue;
    const unsigned char* s = str + st_name;
    const unsigned char* z = memchr(s, 0, (size_t)(end - s));
    const size_t n = (size_t)((z ? z : end) - s);
    if (!defined && n == 0) continue;
    spent += n;
    if (spent > budget) return 0;
    if (!ascii) {
      for (size_t k = 0; k < n; ++k) {
        if (s[k] >= 0x80) return 0; /* its decoding and order are Python's */
      }
    }
    name_t* slot = defined ? &all[count - 1 - (*n_exp)++] : &all[(*n_imp)++];
    slot->s = s;
    slot->n = n;
    slot->key = key_at(slot, 0);
  }
  multikey_sort(all, *n_imp, 0);
  multikey_sort(all + (count - *n_exp), *n_exp, 0);
  return 1;
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
  const unsigned long long entry = is64 ? 24 : 16;
  if (sym_off > len || sym_size > len - sym_off || str_off > len || str_size > len - str_off ||
      sym_size % entry != 0 || str_size == 0) {
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
  }
  const size_t count = (size_t)(sym_size / entry);
  const unsigned char* base = (const unsigned char*)view.buf;
  name_t* all = (name_t*)malloc((count ? count : 1) * sizeof(name_t));
  if (all == NULL) {
    PyBuffer_Release(&view);
    return PyErr_NoMemory();
  }
  size_t n_imp = 0, n_exp = 0;
  int ok;
  Py_BEGIN_ALLOW_THREADS;
  ok = select_and_sort(base + sym_off, count, is64, little, base + str_off, (size_t)str_size, all,
                       &n_imp, &n_exp);
  Py_END_ALLOW_THREADS;
  PyObject* result = NULL;
  if (!ok) {
    result = Py_NewRef(Py_None);
  } else {
    PyObject* imports = as_list(all, n_imp);
    PyObject* exports = imports ? as_list(all + (count - n_exp), n_exp) : NULL;
    if (exports != NULL) {
      result = PyTuple_Pack(2, imports, exports);
      Py_DECREF(exports);
    }
    Py_XDECREF(imports);
  }
  free(all);
  PyBuffer_Release(&view);
  return result;
}

static PyMethodDef methods[] = {
    {"sorted_names", sorted_names, METH_VARARGS,
     "sorted_names(buffer, sym_off, sym_size, str_off, str_size, is64, little) -> "
     "(imports, exports) | None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "_symnames",
    "Sorted ELF symbol names, in C.",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__symnames(void) { return PyModule_Create(&module_def); }
