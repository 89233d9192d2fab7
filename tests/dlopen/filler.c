/* A library with FILLER_BYTES of initial-exec TLS and nothing else: the dlopen host loads
 * copies of it until glibc's static-TLS surplus is used up, as other libraries with
 * initial-exec TLS do in a real process. */
__attribute__((tls_model("initial-exec"))) __thread char spanring_test_filler[FILLER_BYTES];

/* Touches the block, so that it is not optimized away. */
char *spanring_test_filler_block(void) {
  spanring_test_filler[0] = 1;
  return spanring_test_filler;
}
