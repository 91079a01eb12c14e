// Nearest-neighbour resampling of a mono source into an audio callback's interleaved output, for
// the vendor's voice (Samvad.Unity/SamvadVoice.cs calls it from OnAudioFilterRead).
//
// Output frame g of the whole stream plays source sample floor(g * sourceRate / outputRate). The
// position between two source samples is kept from one callback to the next, in whole units of
// 1 / outputRate, so nothing drifts: taking a whole number of source samples per callback instead
// (22,050 Hz into 48,000 Hz in callbacks of 1,024 frames: 471 samples where 470.4 are due) plays
// the voice 0.13% fast and skips a sample at the seam of every few callbacks.

using System;

namespace Samvad.Client
{
    public sealed class Resampler
    {
        float[] _source = new float[1];  // [0]: the source sample under the next output frame
        long _offset;                    // where that frame falls past _source[0], in 1/_outputRate samples
        int _outputRate;
        bool _primed;

        /// <summary>Source samples taken from the reader so far.</summary>
        public long Consumed { get; private set; }

        /// <summary>Fill <paramref name="data"/> (<paramref name="channels"/> interleaved, every channel
        /// the same) from <paramref name="read"/>, which works like <see cref="VendorVoice.Read"/>:
        /// (buffer, offset, count), silence where it has nothing.</summary>
        public void Fill(float[] data, int channels, int sourceRate, int outputRate, Func<float[], int, int, int> read)
        {
            if (data == null || read == null) throw new ArgumentNullException(data == null ? "data" : "read");
            if (channels <= 0 || sourceRate <= 0 || outputRate <= 0)
            {
                throw new ArgumentException("channels, sourceRate and outputRate must be positive");
            }
            int frames = data.Length / channels;
            if (frames == 0) return;
            if (outputRate != _outputRate)
            {
                _offset = 0;  // a new output device: start on a whole sample
                _outputRate = outputRate;
            }
            if (!_primed)
            {
                read(_source, 0, 1);
                Consumed = 1;
                _primed = true;
            }
            long end = _offset + (long)frames * sourceRate;
            int take = (int)(end / outputRate);  // source samples past _source[0] that this callback reaches
            if (_source.Length < take + 1)
            {
                var grown = new float[take + 1];
                grown[0] = _source[0];
                _source = grown;
            }
            if (take > 0)
            {
                read(_source, 1, take);
                Consumed += take;
            }
            long position = _offset;
            for (int i = 0; i < frames; i++, position += sourceRate)
            {
                float sample = _source[(int)(position / outputRate)];
                int at = i * channels;
                for (int c = 0; c < channels; c++) data[at + c] = sample;
            }
            _source[0] = _source[take];
            _offset = end - (long)take * outputRate;
        }
    }
}
