// SPDX-License-Identifier: GPL-2.0-or-later
// extern "C" entry points of the engine (see vrnic_engine.h).
#include <new>

#include "engine_internal.hpp"

extern "C" {

struct vrnic_engine *vrnic_engine_new(const struct vrnic_engine_config *cfg,
				      const struct vrnic_platform_ops *ops,
				      void *opaque)
{
	return new (std::nothrow) vrnic_engine{vrnic::Device(*cfg, ops, opaque)};
}

void vrnic_engine_free(struct vrnic_engine *e)
{
	delete e;
}

void vrnic_engine_reset(struct vrnic_engine *e)
{
	e->dev.reset();
}

uint64_t vrnic_engine_reg_read(struct vrnic_engine *e, uint64_t offset,
			       unsigned int size)
{
	return e->dev.reg_read(offset, size);
}

void vrnic_engine_reg_write(struct vrnic_engine *e, uint64_t offset,
			    uint64_t value, unsigned int size)
{
	e->dev.reg_write(offset, value, size);
}

void vrnic_engine_db_write(struct vrnic_engine *e, uint64_t offset,
			   uint64_t value, unsigned int size)
{
	e->dev.db_write(offset, value, size);
}

void vrnic_engine_poll(struct vrnic_engine *e)
{
	e->dev.poll();
}

void vrnic_engine_timer(struct vrnic_engine *e)
{
	e->dev.timer();
}

bool vrnic_engine_can_receive(struct vrnic_engine *e)
{
	return e->dev.can_receive();
}

size_t vrnic_engine_receive(struct vrnic_engine *e, const uint8_t *frame,
			    size_t len)
{
	return e->dev.receive({frame, len});
}

void vrnic_engine_set_link(struct vrnic_engine *e, bool up)
{
	e->dev.set_link(up);
}

} // extern "C"
