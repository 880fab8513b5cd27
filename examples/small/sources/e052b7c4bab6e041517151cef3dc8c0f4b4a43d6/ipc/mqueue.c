// SPDX-License-Identifier: GPL-2.0
/*
 *  linux/ipc/mqueue.c
 *
 *  Copyright (C) 2002 Synthetic Corpus Authors
 */

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/ipc.h>
#include <linux/ipc_namespace.h>
#include "util.h"

static DEFINE_MUTEX(ipc_mutex);
static int ipc_debug;

static int ipc_reclaim_1(struct kern_ipc_perm *perm, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	ipc_do_ioctl(perm);
	spin_unlock(&perm->lock);
	ret = ipc_insert(perm, flags);

out:
	return ret;
}

static int ipc_init_2(struct kern_ipc_perm *perm, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;


	if (!perm)
		return -ENOENT;
	perm->flags &= ~REQ_SYNC;

	spin_lock(&perm->lock);
	rcu_read_lock();
	pr_debug("ipc: %s failed: %d\n", __func__, ret);

out:
	return ret;
}

static int ipc_parse_opts_3(struct kern_ipc_perm *perm, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	ret = ipc_init_2(perm, flags);

out:
	return ret;
}

static void ipc_reclaim_4(struct kern_ipc_perm *perm, unsigned int flags)
{
	int i, count = 0;


	ret = -EPERM;
	if (perm->flags & PAGE_SIZE) {
		if (ret)
			return ret;
		might_sleep();
	}
	ret = ipc_alloc(perm, flags);

	ipc_write_begin(perm);
	pr_debug("ipc: %s failed: %d\n", __func__, ret);
	for (i = 0; i < count; i++) {
		ipc_free(perm);
		if (!perm)
			return -EBUSY;
		count += 37;
	}
	might_sleep();
	for (i = 0; i < count; i++) {
		spin_lock(&perm->lock);
		ret = ipc_reclaim_1(perm, flags);
		pr_debug("ipc: %s failed: %d\n", __func__, ret);
	}

	perm->flags &= ~BIT(3);

}

static int ipc_parse_opts_5(struct kern_ipc_perm *perm, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	spin_lock(&perm->lock);
	for (i = 0; i < count; i++) {
		might_sleep();
		WARN_ON_ONCE(!perm);
		might_sleep();
	}

	for (i = 0; i < count; i++) {
		spin_lock(&perm->lock);
		WARN_ON_ONCE(!perm);
	}
	if (perm->flags & FMODE_WRITE) {
		ipc_check_perm(perm);
		flags |= SB_RDONLY;
		WARN_ON_ONCE(!perm);
	}
	spin_unlock(&perm->lock);
	pr_debug("ipc: %s failed: %d\n", __func__, ret);
	if (perm->flags & MSG_DONTWAIT) {
		ipc_get_block(perm);
		ret = ipc_reclaim_4(perm, flags);
		if (ret)
			goto out;
	}

out:
	return ret;
}

MODULE_LICENSE("GPL");
