// The vendor's mouth shapes for one sentence of his voice (docs/voice.md, "Visemes"): every
// `reply.audio` chunk carries [start_ms, viseme] pairs from its own first sample, and a sentence's
// chunks are appended in order, so a viseme's place is a sample of the sentence's audio. What
// shows is looked up by sample position (the audio's clock: VendorVoice's play position, or an
// AudioSource's timeSamples when the voice plays from a clip), never by the wall clock.
// Visemes are OpenXR's XR_META_face_tracking_visemes, numbered as it numbers them (0 sil .. 14 ou).

using System;
using System.Collections.Generic;

namespace Samvad.Client
{
    public sealed class VisemeTimeline
    {
        public const int Count = 15;
        public static readonly string[] Names = { "sil", "PP", "FF", "TH", "DD", "kk", "CH", "SS", "nn", "RR",
                                                  "aa", "E", "ih", "oh", "ou" };

        readonly List<int> _samples = new List<int>();
        readonly List<int> _visemes = new List<int>();

        /// <summary>Chunks whose pairs broke the wire's rules (not starting at 0, not rising, an id
        /// outside 0-14) or that had sound but no pairs: none from a conforming server.</summary>
        public int Violations { get; private set; }
        public int Pairs { get { return _samples.Count; } }

        /// <summary>Append a chunk's pairs; <paramref name="chunkStart"/> is the sample of the sentence
        /// where the chunk's audio begins.</summary>
        public void Add(int chunkStart, int[][] pairs, int sampleRate, bool hasSound)
        {
            if (pairs == null || pairs.Length == 0)
            {
                if (hasSound) Violations++;
                return;
            }
            int previous = -1;
            for (int i = 0; i < pairs.Length; i++)
            {
                var pair = pairs[i];
                bool ok = pair != null && pair.Length == 2 && pair[1] >= 0 && pair[1] < Count
                          && (i == 0 ? pair[0] == 0 : pair[0] > previous);
                if (!ok) { Violations++; return; }
                previous = pair[0];
                int at = chunkStart + (int)((long)pair[0] * sampleRate / 1000);
                if (_samples.Count > 0 && at < _samples[_samples.Count - 1]) { Violations++; return; }
                _samples.Add(at);
                _visemes.Add(pair[1]);
            }
        }

        /// <summary>The viseme showing at <paramref name="sample"/> (0, silence, before the first).</summary>
        public int At(long sample)
        {
            int i = Index(sample);
            return i < 0 ? 0 : _visemes[i];
        }

        int Index(long sample)
        {
            int lo = 0, hi = _samples.Count - 1, found = -1;
            while (lo <= hi)
            {
                int mid = (lo + hi) >> 1;
                if (_samples[mid] <= sample) { found = mid; lo = mid + 1; } else hi = mid - 1;
            }
            return found;
        }

        /// <summary>Blendshape weights (0-1, one per viseme) at <paramref name="sample"/>: the viseme
        /// showing rises over <paramref name="blendSamples"/> while the one before it falls.</summary>
        public void Weights(float[] weights, long sample, int blendSamples)
        {
            if (weights == null || weights.Length < Count) throw new ArgumentException("15 weights", "weights");
            Array.Clear(weights, 0, Count);
            int i = Index(sample);
            if (i < 0) { weights[0] = 1f; return; }
            float rise = blendSamples <= 0 ? 1f : Math.Min(1f, (sample - _samples[i]) / (float)blendSamples);
            weights[_visemes[i]] += rise;
            weights[i > 0 ? _visemes[i - 1] : 0] += 1f - rise;
        }
    }
}
