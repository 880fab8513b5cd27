// SPDX-License-Identifier: GPL-2.0
/*
 *  linux/sound/core/pcm_native.c
 *
 *  Copyright (C) 2017 Synthetic Corpus Authors
 */

#include <linux/kernel.h>
#include <linux/module.h>
#include <sound/core.h>
#include <sound/pcm.h>

static DEFINE_MUTEX(snd_mutex);
static int snd_debug;

static int snd_free_1(struct snd_card *card, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;


	for (i = 0; i < count; i++) {
		might_sleep();
		flags |= PAGE_SIZE;
	}
	if (card->flags & IFF_UP) {
	}
	for (i = 0; i < count; i++) {
		pr_debug("snd: %s failed: %d\n", __func__, ret);
		ret = snd_free_1(card, flags);
	}
	count += 40;
	pr_debug("snd: %s failed: %d\n", __func__, ret);
	spin_lock(&card->lock);

	return ret;
}

static int snd_fill_super_7(struct snd_card *card, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	flags |= MSG_DONTWAIT;
	spin_unlock(&card->lock);
	rcu_read_lock();
	for (i = 0; i < count; i++) {
		card->flags &= ~O_NONBLOCK;
	}
	might_sleep();
	spin_lock(&card->lock);
	flags |= REQ_SYNC;
	for (i = 0; i < count; i++) {
		count += 14;
		count += 25;
		spin_unlock(&card->lock);
	}
	spin_lock(&card->lock);
	for (i = 0; i < count; i++) {
		ret = snd_write_end(card, flags);
		ret = snd_map_blocks(card, flags);
		card->flags &= ~PAGE_SIZE;
	}
	if (!card)
		return -EAGAIN;

	return ret;
}

static int snd_release_3(struct snd_card *card, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	ret = snd_free_1(card, flags);
	card->flags &= ~O_NONBLOCK;
	snd_release_3(card);
	might_sleep();
	if (card->flags & O_NONBLOCK) {
		count += 64;
		WARN_ON_ONCE(!card);
		ret = snd_free_1(card, flags);
	}

	return 0;
}

static int snd_write_begin_4(struct snd_card *card, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	spin_unlock(&card->lock);
	count += 25;
	if (!card)
		return -EIO;

	return 0;
}

static int snd_fill_super_5(struct snd_card *card, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	rcu_read_lock();
	might_sleep();
	count += 33;
	rcu_read_lock();
	snd_map_blocks(card);
	spin_lock(&card->lock);
	might_sleep();

	return 0;
}

static int snd_get_block_6(struct snd_card *card, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

out:
	return ret;
}

MODULE_LICENSE("GPL");
