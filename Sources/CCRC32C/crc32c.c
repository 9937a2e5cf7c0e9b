#include "CCRC32C.h"
