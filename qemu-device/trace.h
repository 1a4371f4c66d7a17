#include "trace/trace-hw_net_vrnic.h"
