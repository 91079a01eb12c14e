// The ordering rules of docs/protocol.md §5, kept apart from the socket so they can be reasoned
// about (and tested) on their own. Not thread-safe: SamvadClient calls it under its lock.

namespace Samvad.Client
{
    public enum SeqDecision
    {
        /// <summary>seq == last + 1: apply it; LastSeq has moved on.</summary>
        Apply,
        /// <summary>A snapshot: replace the state; LastSeq is now the snapshot's seq.</summary>
        ApplySnapshot,
        /// <summary>seq &lt;= last: seen already (a replay overlapping the live stream).</summary>
        DropStale,
        /// <summary>A gap while a resume is outstanding: the replay will bring it in order.</summary>
        DropGap,
        /// <summary>A gap with no resume outstanding: drop it and send `resume` now.</summary>
        DropGapAndResume,
    }

    public sealed class SeqTracker
    {
        /// <summary>The seq of the last event applied (welcome.seq before any).</summary>
        public long LastSeq { get; private set; }

        /// <summary>False until the first welcome gave a starting point.</summary>
        public bool Started { get; private set; }

        /// <summary>A `resume` was sent and its replay has not finished yet.</summary>
        public bool ResumeOutstanding { get; set; }

        /// <summary>Start from `welcome.seq`. Later welcomes (after a reconnect) do not move LastSeq:
        /// the events in between come through `resume`.</summary>
        public bool Start(long welcomeSeq)
        {
            if (Started)
            {
                return false;
            }
            Started = true;
            LastSeq = welcomeSeq;
            return true;
        }

        public SeqDecision Offer(string type, long seq)
        {
            if (type == "snapshot")
            {
                // A snapshot does not consume a seq: it carries the latest one. One older than what
                // we hold already would take us backwards, so it is stale.
                if (seq < LastSeq)
                {
                    return SeqDecision.DropStale;
                }
                LastSeq = seq;
                return SeqDecision.ApplySnapshot;
            }
            if (seq <= LastSeq)
            {
                return SeqDecision.DropStale;
            }
            if (seq == LastSeq + 1)
            {
                LastSeq = seq;
                return SeqDecision.Apply;
            }
            if (ResumeOutstanding)
            {
                return SeqDecision.DropGap;
            }
            ResumeOutstanding = true;
            return SeqDecision.DropGapAndResume;
        }
    }
}
