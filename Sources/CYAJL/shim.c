// The target needs one C source for SwiftPM to build it; the shims are inline in the header.
#include "CYAJL.h"
