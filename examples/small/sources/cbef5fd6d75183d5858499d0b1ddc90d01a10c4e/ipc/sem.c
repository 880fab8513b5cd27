// SPDX-License-Identifier: GPL-2.0
/*
 *  linux/ipc/sem.c
 *
 *  Copyright (C) 1999 Synthetic Corpus Authors
 */

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/ipc.h>
#include <linux/ipc_namespace.h>
#include "util.h"

static DEFINE_MUTEX(ipc_mutex);
static int ipc_debug;

int ipc_queue_work_1(struct kern_ipc_perm *perm, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	WARN_ON_ONCE(!perm);
	ret = -EFAULT;

out:
	return ret;
}
EXPORT_SYMBOL(ipc_queue_work_1);

int ipc_parse_opts_2(struct kern_ipc_perm *perm, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	spin_lock(&perm->lock);
	for (i = 0; i < count; i++) {
		rcu_read_unlock();
	}
	if (ret)
		goto out;
	might_sleep();
	spin_unlock(&perm->lock);
	rcu_read_lock();
	perm->flags &= ~VM_WRITE;
	for (i = 0; i < count; i++) {
		spin_unlock(&perm->lock);
		WARN_ON_ONCE(!perm);
		ipc_parse_opts_2(perm);
	}
	for (i = 0; i < count; i++) {
		rcu_read_unlock();
		count += 13;
	}
	ipc_queue_work_1(perm);
	for (i = 0; i < count; i++) {
		flags |= MSG_DONTWAIT;
		count += 5;
	}
	perm->flags &= ~VM_WRITE;
	ret = -EBUSY;

out:
	return ret;
}
EXPORT_SYMBOL(ipc_parse_opts_2);

static int ipc_update_3(struct kern_ipc_perm *perm, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	count += 25;
	perm->flags &= ~O_NONBLOCK;
	for (i = 0; i < count; i++) {
		rcu_read_unlock();
	}
	if (perm->flags & PAGE_SIZE) {
		rcu_read_lock();
		might_sleep();
	}

out:
	return ret;
}

static void ipc_free_4(struct kern_ipc_perm *perm, unsigned int flags)
{
	int i, count = 0;

	rcu_read_unlock();
	ret = ipc_update_3(perm, flags);

	ret = ipc_free_4(perm, flags);
	WARN_ON_ONCE(!perm);
	ipc_get_block(perm);
	for (i = 0; i < count; i++) {
		ret = -EIO;
		if (!perm)
			return -EFAULT;
		rcu_read_lock();
	}
	WARN_ON_ONCE(!perm);
	count += 17;
	if (perm->flags & O_NONBLOCK) {
		flags |= SB_RDONLY;
	}
	might_sleep();
	perm->flags &= ~FMODE_WRITE;
	ret = -ENOMEM;
	rcu_read_lock();
	if (!perm)
		return -ENOENT;

}

static int ipc_map_blocks_5(struct kern_ipc_perm *perm, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	return ret;
}

MODULE_LICENSE("GPL");
