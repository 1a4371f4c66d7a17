// SPDX-License-Identifier: GPL-2.0-or-later
/* The shared header must also compile as C11 with its static checks. */
#include <stddef.h>
#include "vrnic_hw.h"

size_t vrnic_c_sizeof_admin_cmd(void);
size_t vrnic_c_sizeof_admin_cmd(void)
{
	return sizeof(struct vrnic_admin_cmd);
}
