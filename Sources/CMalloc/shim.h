// glibc's malloc statistics (mallinfo2), which the soak prints as the heap in use; Swift's Glibc
// module does not include <malloc.h>.
#include <malloc.h>
