// The translation unit that compiles the tests' precompiled header
// (tests/CMakeLists.txt, gpuscope_test_pch): the header is all there is.
int main() { return 0; }
