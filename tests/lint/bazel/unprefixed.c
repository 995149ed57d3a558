/* Negative control for shimkit_lint_test: imports an unprefixed shim. */
extern int aoti_torch_get_dim(void* tensor, long* dim);

int unprefixed_fixture_dim(void* tensor) {
  long dim = 0;
  return aoti_torch_get_dim(tensor, &dim) == 0 ? (int)dim : -1;
}
