// The program of each layer's link check (CMakeLists.txt, jobman_layer): the layer's whole archive is linked with
// its dependencies alone, so an object that calls into a layer it may not use leaves a symbol undefined.
int main() {
  return 0;
}
